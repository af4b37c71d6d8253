//! `gdrdoctor topo`: the matrix for the placement fixtures with known answers, its JSON schema,
//! the nvidia-smi shape, and a node with thousands of GPUs.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;
use std::time::Duration;

/// (fixture, GPU0-NIC0 level) as each fixture's FIXTURE.md states it.
const KNOWN: &[(&str, &str)] = &[
    ("placement-pix", "PIX"),
    ("placement-pxb", "PXB"),
    ("placement-phb", "PHB"),
    ("placement-node", "NODE"),
    ("placement-sys", "SYS"),
    // Port types unreadable (64-byte config): the same answer from the path's shape.
    ("config-unprivileged", "PIX"),
    ("caplist-loop", "PIX"),
    ("lab-switch-pt", "PIX"),
];

/// `topo --format json` on fixture `name`, with its config if it has one.
fn topo(name: &str) -> serde_json::Value {
    let cfg = fixture_config(name);
    let mut args = vec!["--root", fixture(name)];
    if let Some(cfg) = &cfg {
        args.extend(["--config", cfg.as_str()]);
    }
    args.extend(["topo", "--format", "json"]);
    let out = gdrdoctor(&args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    json(&out)
}

fn level(t: &serde_json::Value, a: &str, b: &str) -> String {
    let idx = |n: &str| {
        t["devices"]
            .as_array()
            .unwrap()
            .iter()
            .position(|d| d["name"] == n)
            .unwrap()
    };
    t["matrix"][idx(a)][idx(b)]
        .as_str()
        .unwrap_or("null")
        .to_owned()
}

#[test]
fn known_levels() {
    for (fixture, want) in KNOWN {
        let t = topo(fixture);
        assert_eq!(level(&t, "GPU0", "NIC0"), *want, "{fixture}");
        assert_eq!(level(&t, "NIC0", "GPU0"), *want, "{fixture}: symmetric");
        assert_eq!(level(&t, "GPU0", "GPU0"), "X");
    }
}

#[test]
fn eight_gpu_node_matches_its_wiring() {
    // 2 sockets x 2 host bridges, one switch each holding 2 GPUs and 2 NICs.
    let t = topo("healthy-8gpu-roce");
    assert_eq!(level(&t, "GPU0", "NIC0"), "PIX");
    assert_eq!(level(&t, "GPU0", "NIC1"), "PIX");
    assert_eq!(level(&t, "GPU0", "NIC2"), "NODE");
    assert_eq!(level(&t, "GPU0", "NIC4"), "SYS");
    assert_eq!(level(&t, "GPU0", "GPU1"), "PIX");
    assert_eq!(level(&t, "NIC6", "NIC7"), "PIX");
    let nic0 = &t["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "NIC0")
        .unwrap()
        .clone();
    assert_eq!(
        (
            nic0["kind"].as_str(),
            nic0["rdma_device"].as_str(),
            nic0["bdf"].as_str()
        ),
        (Some("nic"), Some("mlx5_0"), Some("0000:19:00.0"))
    );
    assert_eq!(nic0["numa_node"], 0);
}

#[test]
fn vm_gpus_on_the_root_bus_meet_in_the_host_bridge() {
    // The H200 VM: both GPUs right on bus 00 (nvidia-smi shows NV18 for their NVLink; PCIe-wise
    // they share only the host bridge).
    let t = topo("h200x2-vm");
    assert_eq!(level(&t, "GPU0", "GPU1"), "PHB");
    assert_eq!(t["devices"].as_array().unwrap().len(), 2);
}

#[test]
fn numa_unknown_is_said() {
    let t = topo("placement-node");
    assert!(
        t["numa_assumed"].as_array().unwrap().is_empty(),
        "both NUMA nodes known there"
    );
}

/// A kernel that gives no `numa_node` (-1: VMs, some single-socket boards): nvidia-smi's NUMA
/// Affinity is then the nodes the device's local CPUs belong to (seen on the 2x H200 VM:
/// CPU Affinity `0-31`, NUMA Affinity `0`); with no node list at all it is unknown.
#[test]
fn numa_affinity_from_the_cpus_when_the_kernel_gives_no_node() {
    let (_dir, root) = fixture_copy("placement-node");
    let bdf = topo("placement-node")["devices"][0]["bdf"]
        .as_str()
        .unwrap()
        .to_owned();
    let gpu = root.join(format!("sys/bus/pci/devices/{bdf}/numa_node"));
    std::fs::write(&gpu, "-1\n").unwrap();
    let cpus = std::fs::read_to_string(gpu.with_file_name("local_cpulist")).unwrap();
    let node_of_cpus = std::fs::read_dir(root.join("sys/devices/system/node"))
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let c = std::fs::read_to_string(e.path().join("cpulist")).ok()?;
            (c == cpus).then(|| e.file_name().to_string_lossy()[4..].to_owned())
        })
        .next()
        .expect("a node with the GPU's CPUs");
    let args = ["--root", root.to_str().unwrap(), "topo", "--format", "json"];
    let t = json(&gdrdoctor(&args));
    assert_eq!(t["devices"][0]["numa_node"], -1);
    assert_eq!(t["devices"][0]["numa_affinity"], node_of_cpus.as_str());
    let human = stdout(&gdrdoctor(&args[..3]));
    let row = human.lines().nth(1).unwrap();
    assert!(
        row.ends_with(&format!("\t{}\t{node_of_cpus}", cpus.trim())),
        "{row:?}"
    );

    std::fs::remove_dir_all(root.join("sys/devices/system/node")).unwrap();
    let t = json(&gdrdoctor(&args));
    assert_eq!(t["devices"][0]["numa_affinity"], serde_json::Value::Null);
    let human = stdout(&gdrdoctor(&args[..3]));
    assert!(human.lines().nth(1).unwrap().ends_with("\tN/A"), "{human}");
}

#[test]
fn human_output_has_nvidia_smi_shape() {
    let out = stdout(&gdrdoctor(&["--root", fixture("placement-pileup"), "topo"]));
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity"
    );
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("GPU0\t X \tPIX\tPIX\tPHB\t"),
        "{out}"
    );
    // Every row has as many columns as the header: the NUMA Affinity value sits under it.
    for line in out.lines().take_while(|l| !l.is_empty()) {
        assert_eq!(line.split('\t').count(), 7, "{line:?}");
    }
    for needle in [
        "Legend:",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "NIC Legend:",
        "  NIC0: mlx5_0 (",
        "  NIC1: mlx5_1 (",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    insta::assert_snapshot!("placement-pileup.topo", out);
}

#[test]
fn json_fields_are_documented() {
    let t = topo("healthy-8gpu-roce");
    assert_json_documented("docs/topo-json.md", &Fields::default(), &[t]);
}

#[test]
fn crowded_nic_warns_when_the_idle_one_is_within_policy() {
    // placement-pileup: both GPUs' only nearest NIC is mlx5_0 (PIX); mlx5_1 is PHB from both.
    // Within the default PXB policy the idle NIC is no help; with PHB allowed it is.
    let r = json(&gdrdoctor(&[
        "--root",
        fixture("placement-pileup"),
        "check",
        "--format",
        "json",
    ]));
    assert!(!codes(&r).iter().any(|(c, _)| c == "gpu-nic-crowded"));
    let cfg = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    std::fs::write(cfg.path(), "thresholds:\n  gdr_level: PHB\n").unwrap();
    let r = json(&gdrdoctor(&[
        "--config",
        cfg.path().to_str().unwrap(),
        "--root",
        fixture("placement-pileup"),
        "check",
        "--format",
        "json",
    ]));
    let crowded: Vec<_> = check(&r, "pcie-placement")["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "gpu-nic-crowded")
        .collect();
    assert_eq!(crowded.len(), 1, "{r:#}");
    assert_eq!(crowded[0]["status"], "warn");
    assert!(
        crowded[0]["message"]
            .as_str()
            .unwrap()
            .contains("mlx5_1 (PHB from GPU"),
        "{}",
        crowded[0]["message"]
    );
    // And a PHB node passes placement under a PHB policy.
    let r = json(&gdrdoctor(&[
        "--config",
        cfg.path().to_str().unwrap(),
        "--root",
        fixture("placement-phb"),
        "check",
        "--format",
        "json",
    ]));
    assert_eq!(check(&r, "pcie-placement")["status"], "pass");
}

// -- a node with thousands of GPUs (issue 14) ------------------------------------------------

/// Where each device of a large root sits: (switch, PCI domain), GPUs first then NICs, as
/// `topo` orders them.
struct Large {
    places: Vec<(usize, u32)>,
}

/// PCI config space of 256 bytes: vendor, device, class, and a PCI Express capability at 0x40
/// giving the port type (0 endpoint, 4 root port, 5 switch upstream, 6 switch downstream).
fn config(vendor: u16, device: u16, class: u32, port_type: u8) -> Vec<u8> {
    let mut c = vec![0u8; 256];
    c[0..2].copy_from_slice(&vendor.to_le_bytes());
    c[2..4].copy_from_slice(&device.to_le_bytes());
    c[6] = 0x10; // Status: capabilities list
    c[9..12].copy_from_slice(&class.to_le_bytes()[..3]);
    c[0x0e] = u8::from(port_type != 0); // header type 1 for bridges
    c[0x34] = 0x40;
    c[0x40] = 0x10; // PCI Express, last in the list
    c[0x42] = 0x02 | (port_type << 4);
    c
}

/// Writes a capture of a node with `gpus` NVIDIA GPUs and `nics` Mellanox RDMA NICs to `file`
/// (`.tar.gz`, read in place by `--root`), the shape of `fixtures/synth/synth.py --large`:
/// switches of 32 downstream ports, 7 per PCI domain (a domain has 256 buses; a switch of k
/// ports takes k + 3), domains alternating between NUMA nodes 0 and 1, and every few switches
/// one NIC. Only what the PCIe placement reads is written (config space, NUMA node, the PCI
/// device links, the RDMA class links), and as an archive, not a directory: thousands of
/// functions take a fraction of a second, not thousands of file creations.
fn large_root(file: &std::path::Path, gpus: usize, nics: usize) -> Large {
    const PER_SWITCH: usize = 32;
    const PER_DOMAIN: usize = 7;
    let total = gpus + nics;
    let switches = total.div_ceil(PER_SWITCH);
    let stride = (switches / nics.max(1)).max(1);
    // Each switch's endpoints: Some(nic index) or None for a GPU.
    let mut eps: Vec<Vec<Option<usize>>> = vec![Vec::new(); switches];
    let mut n = 0;
    for (s, e) in eps.iter_mut().enumerate() {
        if n < nics && s % stride == 0 {
            e.push(Some(n));
            n += 1;
        }
    }
    let mut g = 0;
    for e in eps.iter_mut() {
        while e.len() < PER_SWITCH && g < gpus {
            e.push(None);
            g += 1;
        }
    }
    assert_eq!(
        (g, n),
        (gpus, nics),
        "the NICs fit in the switches' first ports"
    );
    // Files and links, written to the archive at the end.
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut links: Vec<(String, String)> = Vec::new();
    let mut gpu_places = Vec::new();
    let mut nic_places = vec![(0, 0); nics];
    let (mut numa, mut rdma) = (Vec::new(), Vec::new());
    let mut function = |path: &str, config: Vec<u8>| {
        files.push((format!("{path}/config"), config));
        let bdf = path.rsplit('/').next().unwrap();
        let target = format!("../../../{}", &path["sys/".len()..]);
        links.push((format!("sys/bus/pci/devices/{bdf}"), target));
    };
    for (s, e) in eps.iter().enumerate() {
        let domain = (s / PER_DOMAIN) as u32;
        let k = s % PER_DOMAIN;
        let bus = 35 * k;
        let rp = format!(
            "sys/devices/pci{domain:04x}:00/{domain:04x}:00:{:02x}.0",
            k + 1
        );
        function(&rp, config(0x8086, 0x352a, 0x060400, 4));
        let usp = format!("{rp}/{domain:04x}:{:02x}:00.0", bus + 1);
        function(&usp, config(0x1000, 0xc030, 0x060400, 5));
        for (port, ep) in e.iter().enumerate() {
            let dsp = format!("{usp}/{domain:04x}:{:02x}:{port:02x}.0", bus + 2);
            function(&dsp, config(0x1000, 0xc030, 0x060400, 6));
            let bdf = format!("{domain:04x}:{:02x}:00.0", bus + 3 + port);
            let path = format!("{dsp}/{bdf}");
            match ep {
                None => {
                    function(&path, config(0x10de, 0x2330, 0x030200, 0));
                    gpu_places.push((s, domain));
                }
                Some(i) => {
                    function(&path, config(0x15b3, 0x1021, 0x020000, 0));
                    let name = format!("mlx5_{i}");
                    let dev = format!("{path}/infiniband/{name}");
                    rdma.push((format!("{dev}/device"), format!("../../../{bdf}")));
                    rdma.push((
                        format!("sys/class/infiniband/{name}"),
                        format!("../../{}", &dev["sys/".len()..]),
                    ));
                    nic_places[*i] = (s, domain);
                }
            }
            numa.push((format!("{path}/numa_node"), format!("{}\n", domain % 2)));
        }
    }
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(file).unwrap(),
        flate2::Compression::fast(),
    );
    let mut tar = tar::Builder::new(gz);
    let numa = numa.into_iter().map(|(p, t)| (p, t.into_bytes()));
    for (path, data) in files.into_iter().chain(numa) {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        tar.append_data(&mut h, path, data.as_slice()).unwrap();
    }
    for (path, target) in links.into_iter().chain(rdma) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        tar.append_link(&mut h, path, target).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
    gpu_places.extend(nic_places);
    Large { places: gpu_places }
}

/// The level `topo` should show between two endpoints of a large root.
fn expected(a: (usize, u32), b: (usize, u32)) -> Cell {
    match (a, b) {
        // Two ports of one switch.
        (a, b) if a == b => Cell::Pix,
        // Two root ports of one host bridge.
        ((_, x), (_, y)) if x == y => Cell::Phb,
        // Two host bridges of one NUMA node.
        ((_, x), (_, y)) if x % 2 == y % 2 => Cell::Node,
        _ => Cell::Sys,
    }
}

/// A cell of `topo --format json`, a byte each: the test holds 4 million of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
enum Cell {
    #[serde(rename = "X")]
    Me,
    #[serde(rename = "PIX")]
    Pix,
    #[serde(rename = "PXB")]
    Pxb,
    #[serde(rename = "PHB")]
    Phb,
    #[serde(rename = "NODE")]
    Node,
    #[serde(rename = "SYS")]
    Sys,
}

#[derive(serde::Deserialize)]
struct Topo {
    devices: Vec<TopoDevice>,
    matrix: Vec<Vec<Option<Cell>>>,
    numa_assumed: Vec<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct TopoDevice {
    name: String,
}

#[test]
fn topo_on_thousands_of_gpus_streams_the_matrix() {
    // 2,000 GPUs and 8 NICs: 4 million cells. Before the matrix was streamed, `topo` held every
    // cell as a route and then as a string, about 170 bytes a cell: 700 MB here. Now what it
    // holds is linear in the devices.
    const GPUS: usize = 2000;
    const NICS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("large.tar.gz");
    let large = large_root(&root, GPUS, NICS);
    // Under 96 MiB, or the matrix is held, not streamed.
    let ran = Gdrdoctor::new()
        .root_at(&root)
        .args(["topo", "--format", "json"])
        .within(Duration::from_secs(300), 95)
        .run();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let t: Topo =
        serde_json::from_str(&ran.stdout).expect("topo's output is JSON of the documented shape");
    let n = GPUS + NICS;
    assert_eq!(t.devices.len(), n);
    assert_eq!(t.devices[GPUS].name, "NIC0");
    assert_eq!(t.matrix.len(), n, "one row per device");
    let mut wrong = Vec::new();
    for (i, row) in t.matrix.iter().enumerate() {
        assert_eq!(row.len(), n, "row {i}: one cell per device");
        for (j, cell) in row.iter().enumerate() {
            let want = if i == j {
                Cell::Me
            } else {
                expected(large.places[i], large.places[j])
            };
            if *cell != Some(want) && wrong.len() < 5 {
                wrong.push(format!("[{i}][{j}] = {cell:?}, want {want:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:?}");
    assert!(t.numa_assumed.is_empty(), "every NUMA node is known");
}

/// gdrdoctor with `args` as a user who cannot read what `deny` makes mode 0700 (root reads
/// anything, so as root it runs as nobody; the rest of the tree stays readable). `None` when
/// setpriv cannot run it.
fn denied(
    dir: &tempfile::TempDir,
    deny: &std::path::Path,
    args: &[&str],
) -> Option<std::process::Output> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path, m| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode(dir.path(), 0o755);
    mode(deny, 0o000);
    let out = Gdrdoctor::new().args(args).unprivileged().try_output();
    mode(deny, 0o755);
    out
}

/// Issue 25: `topo` as a user who cannot read sys/ printed "no GPU and no RDMA device found"
/// and exited 0, where `check` says unknown, permission denied. It names what it could not
/// read, as `check` does, and does not exit 0: 2 with nothing to show, 1 when what it shows
/// may leave something out (an RDMA class it cannot list: the NIC missing from the matrix).
#[test]
fn topo_says_what_it_could_not_read() {
    let (dir, root) = fixture_copy("placement-pix");
    let r = root.to_str().unwrap();
    for format in ["human", "json", "svg", "dot"] {
        let Some(out) = denied(
            &dir,
            &root.join("sys"),
            &["--root", r, "topo", "--format", format],
        ) else {
            return;
        };
        assert_eq!(code(&out), 2, "{format}: {}", stderr(&out));
        let err = stderr(&out);
        for needle in [
            "/sys/bus (permission denied)",
            "/sys/devices (permission denied)",
        ] {
            assert!(err.contains(needle), "{format}: {needle} not in {err}");
        }
        assert!(
            !stdout(&out).contains("no GPU and no RDMA device found"),
            "{}",
            stdout(&out)
        );
    }
    // The same reads, as `check` reports them.
    let out = denied(
        &dir,
        &root.join("sys"),
        &["--root", r, "check", "--format", "json"],
    )
    .unwrap();
    assert!(
        stdout(&out).contains("permission denied"),
        "{}",
        stdout(&out)
    );

    // Only the RDMA class unreadable: the GPU is shown, the NIC cannot be, and it says why.
    let class = root.join("sys/class/infiniband");
    let out = denied(&dir, &class, &["--root", r, "topo", "--format", "json"]).unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let t = json(&out);
    assert_eq!(t["devices"].as_array().unwrap().len(), 1, "{t:#}");
    assert_eq!(
        t["problems"],
        serde_json::json!([{"path": "/sys/class/infiniband", "message": "permission denied"}])
    );
    assert!(stderr(&out).contains("/sys/class/infiniband (permission denied)"));
    let out = denied(&dir, &class, &["--root", r, "topo"]).unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stdout(&out).starts_with("\tGPU0\t"), "{}", stdout(&out));
}
