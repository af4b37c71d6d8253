use super::*;

fn event(line: &str) -> Event<'_> {
    parse(line).expect("an NCCL line").event
}

#[test]
fn prefixes() {
    // NCCL's own prefix (src/debug.cc).
    let l = parse("node-1:32726:33054 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB")
        .unwrap();
    assert_eq!(
        l.origin,
        Origin {
            host: Some("node-1"),
            pid: Some(32726),
            dev: Some(0)
        }
    );
    // mpirun --tag-output (aws/aws-k8s-tester#473).
    let l = parse("[1,8]<stdout>:multi-node-nccl-test-worker-1:20:67 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/Socket/0").unwrap();
    assert_eq!(l.origin.host, Some("multi-node-nccl-test-worker-1"));
    assert_eq!(l.origin.dev, Some(0));
    // Ray (ray-project/ray#40850).
    let l = parse("(RayTrainWorker pid=83500) localhost:83500:84560 [2] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 1 'virbr0'").unwrap();
    assert_eq!(l.origin.host, Some("localhost"));
    assert_eq!(l.origin.dev, Some(2));
    // No host (NVIDIA/nccl-tests#245).
    let l = parse(" [0] NCCL INFO DMA-BUF is available on GPU device 0").unwrap();
    assert_eq!(
        l.origin,
        Origin {
            host: None,
            pid: None,
            dev: Some(0)
        }
    );
    assert_eq!(l.event, Event::DmaBufAvailable { cuda_dev: 0 });
    // A bare marker (NVIDIA/nccl#1151, quoted in prose).
    let l =
        parse("NCCL INFO GPU Direct RDMA Disabled for GPU ca000 / HCA 0 (distance 7 > 4)").unwrap();
    assert_eq!(l.origin, Origin::default());
    // A warning names its source line (NVIDIA/nccl#1737, HPC-X plugin).
    let l = parse("gh-3714u15:7038:7053 [0] ib_plugin.c:1007 NCCL WARN NET/IB : Got completion from peer 10.1.32.3<42519> with error 5, opcode 0, len 0, vendor err 249").unwrap();
    assert_eq!(l.level, Level::Warn);
    assert_eq!(l.origin.host, Some("gh-3714u15"));
    assert_eq!(l.origin.dev, Some(0));
    assert!(matches!(l.event, Event::Warn { text } if text.starts_with("NET/IB : Got completion")));
    // mpirun's rank before the host (NVIDIA/nccl#1453), srun -l's, an empty host
    // (autoscriptlabs/nccl-mesh-plugin#56), a timestamp (NCCL_DEBUG_TIMESTAMP_FORMAT).
    for (line, host, dev) in [
        (
            "[0] h100clust-worker-1:497888:498087 [0] NCCL INFO Connected all trees",
            Some("h100clust-worker-1"),
            0,
        ),
        (
            "0: node7:12:34 [3] NCCL INFO Connected all trees",
            Some("node7"),
            3,
        ),
        (
            ":22901:22901 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0",
            None,
            0,
        ),
        (
            "[2025-01-01 10:00:00] n1:5:6 [7] NCCL INFO Connected all trees",
            Some("n1"),
            7,
        ),
        ("n1:x:6 [7] NCCL INFO Connected all trees", None, 7),
    ] {
        let o = parse(line).unwrap().origin;
        assert_eq!((o.host, o.dev), (host, Some(dev)), "{line}");
    }
    // Not NCCL's.
    assert_eq!(parse("# Avg bus bandwidth    : 33.3227"), None);
    assert_eq!(parse("NCCL is great"), None);
}

#[test]
fn versions() {
    // 2.4 printf (Mellanox/nv_peer_memory#56).
    let l = parse("NCCL version 2.4.7+cuda10.0").unwrap();
    assert_eq!(l.level, Level::Version);
    assert_eq!(
        l.event,
        Event::Version {
            version: Version::new(2, 4, 7),
            text: "2.4.7+cuda10.0",
            rccl: false
        }
    );
    // INFO (NVIDIA/nccl#1866).
    assert!(matches!(
        event("cl4-gpu03-vm:1134070:1134070 [0] NCCL INFO NCCL version 2.27.6+cuda13.0"),
        Event::Version { version, .. } if version == Version::new(2, 27, 6)
    ));
    assert_eq!(Version::parse("2.30.3"), Some(Version::new(2, 30, 3)));
    assert_eq!(Version::parse("two"), None);
}

#[test]
fn hca_lines() {
    // 2.5-2.12 (NVIDIA/nccl#899).
    let l = parse("21346d5cefce:5325:5337 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)").unwrap();
    assert_eq!(
        l.event,
        Event::HcaGdr {
            net: "IB",
            enabled: false,
            index: 1,
            name: "mlx5_1",
            via: HcaVia::NoModule,
            gpu: None
        }
    );
    assert_eq!(l.era, Era::minors(5, 13));
    // 2.13+ (NVIDIA/nccl#1676).
    let l = parse("learn01:2228637:2230195 [3] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 2 'mlx5_2'").unwrap();
    assert!(matches!(
        l.event,
        Event::HcaGdr {
            index: 2,
            via: HcaVia::Unstated,
            enabled: false,
            ..
        }
    ));
    assert_eq!(l.era, Era::since(13));
    // Sockets (2.28.9 on a one-GPU machine, REFERENCE.md section 9).
    assert!(matches!(
        event("h:1:2 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'"),
        Event::HcaGdr {
            net: "Socket",
            name: "eth0",
            ..
        }
    ));
    // HPC-X plugin (nccl-rdma-sharp-plugins src/p2p_plugin.c), no closing quote.
    assert!(matches!(
        event(
            "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (nvidia-peermem) enabled for HCA 0 'mlx5_0"
        ),
        Event::HcaGdr {
            enabled: true,
            via: HcaVia::PeerMem,
            name: "mlx5_0",
            ..
        }
    ));
    assert!(matches!(
        event("h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 3 'mlx5_3"),
        Event::HcaGdr {
            index: 3,
            via: HcaVia::DmaBuf,
            ..
        }
    ));
    // 2.4 net_ib.cc, per GPU.
    assert!(matches!(
        event(
            "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 0[0] / HCA 0 'mlx5_0' (no module or not supported by GPU)"
        ),
        Event::HcaGdr {
            via: HcaVia::NoModuleOrGpu,
            gpu: Some("0[0]"),
            ..
        }
    ));
}

#[test]
fn distance_lines() {
    // 2.4 (Mellanox/nv_peer_memory#56).
    let l = parse("master_node:11717:11986 [2] NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 2[2] / HCA 0 (distance 3 >= 2)").unwrap();
    let Event::GpuGdr(g) = l.event else {
        panic!("{:?}", l.event)
    };
    assert_eq!(
        (g.gpu, g.hca, g.distance, g.level, g.inclusive, g.enabled),
        ("2[2]", "0", 3, 2, true, false)
    );
    assert_eq!(l.era, Era::minors(4, 5));
    // 2.6-2.20 (NVIDIA/DeepLearningExamples#383).
    let l = parse("node-1:32729:33061 [3] NCCL INFO GPU Direct RDMA Enabled for GPU 86000 / HCA 0 (distance 4 <= 4), read 0").unwrap();
    let Event::GpuGdr(g) = l.event else { panic!() };
    assert_eq!(
        (g.gpu, g.distance, g.level, g.read, g.enabled),
        ("86000", 4, 4, Some(false), true)
    );
    assert_eq!(l.era, Era::minors(6, 24));
    // 2.24-2.25: the rank (paths.cc `GPU %d / HCA %lx`).
    let l =
        parse("h:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 3 / HCA 1 (distance 7 > 4)")
            .unwrap();
    assert_eq!(l.era, Era::minors(24, 29));
    // 2.26-2.28: ` mode %s`.
    let l = parse("h:1:2 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 5 <= 5), read 1 mode Default").unwrap();
    let Event::GpuGdr(g) = l.event else { panic!() };
    assert_eq!((g.read, g.mode), (Some(true), Some("Default")));
    assert_eq!(
        l.era,
        Era::new(Version::new(2, 26, 0), Version::new(2, 29, 0))
    );
    // 2.29 (paths.cc `gpuNetMsg`), with and without PXN.
    let l = parse("h:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for GPU/0-1b000 (rank 3) - NET/0-0 (distance 9 > 6)").unwrap();
    let Event::GpuGdr(g) = l.event else { panic!() };
    assert_eq!(
        (g.gpu, g.hca, g.distance, g.level),
        ("0-1b000 (rank 3)", "0-0", 9, 6)
    );
    let l = parse("h:1:2 [0] NCCL INFO GPU Direct RDMA Enabled for GPU/0-1b000 (rank 3) - NET/0-0 ( using PXN via GPU/0-2a000, distance 5 <= 6, read 1, mode Default)").unwrap();
    let Event::GpuGdr(g) = l.event else { panic!() };
    assert_eq!(
        (g.pxn_via, g.distance, g.read, g.mode),
        (Some("0-2a000"), 5, Some(true), Some("Default"))
    );
    // Cut short: recognised as about GDR, not parsed.
    assert_eq!(
        event("h:1:2 [1] NCCL INFO GPU Direct RDMA Disabled for GPU 3b000 / HCA 0"),
        Event::Unrecognised
    );
}

#[test]
fn connections() {
    // 2.4 (Mellanox/nv_peer_memory#56).
    let Event::Connection(c) =
        event("master_node:11718:11985 [3] NCCL INFO Ring 01 : 3 -> 6 [send] via NET/IB/0")
    else {
        panic!()
    };
    assert_eq!(
        (c.channel, c.from, c.to, c.dir, c.net, c.dev, c.gdr),
        (Some(1), 3, 6, Dir::Send, "IB", 0, false)
    );
    // 2.5 (NVIDIA/nccl#392).
    let l = parse(" [0] NCCL INFO Ring 00 : 15[41000] -> 0[1b000] [receive] via NET/IB/0").unwrap();
    assert_eq!(l.era, Era::minors(5, 7));
    let Event::Connection(c) = l.event else {
        panic!()
    };
    assert_eq!(c.local_and_peer(), (0, 15));
    // 2.7-2.11 (NVIDIA/nccl#707).
    let l = parse("10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA").unwrap();
    assert_eq!(l.era, Era::minors(7, 12));
    let Event::Connection(c) = l.event else {
        panic!()
    };
    assert_eq!((c.dev, c.gdr), (5, true));
    // 2.18+ (Azure/aks-rdma-infiniband#36).
    let l = parse("leader-h2nng:523:564 [0] NCCL INFO Channel 08/0 : 9[1] -> 0[0] [receive] via NET/IB/0/GDRDMA").unwrap();
    assert_eq!(l.era, Era::since(18));
    // A plugin's name with a space, PXN proxy, (PCI), /Shared.
    let Event::Connection(c) = event(
        "h:1:2 [0] NCCL INFO Channel 00/1 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/1(3)/GDRDMA(PCI)/Shared",
    ) else {
        panic!()
    };
    assert_eq!(
        (c.net, c.dev, c.proxy, c.gdr, c.pci, c.shared),
        ("AWS Libfabric", 1, Some(3), true, true, true)
    );
    // Not NET.
    assert_eq!(
        event(
            "swat1-04:2017630:2017697 [7] NCCL INFO Channel 00/0 : 7[7] -> 6[6] via P2P/direct pointer/read"
        ),
        Event::IntraNode
    );
    // The ring summary is no connection.
    assert_eq!(
        event("gpu01:351578:352168 [0] NCCL INFO Channel 00/02 :    0   1"),
        Event::Other
    );
    // Cut short (NVIDIA/nccl#1814): about NET, not parsed.
    assert_eq!(
        event(
            "hostname-test:986:1254 [6] NCCL INFO Channel 14/0 : 6[6] -> 38[6] [receive] via NET/IBext_v8/"
        ),
        Event::Unrecognised
    );
}

#[test]
fn init_lines() {
    assert_eq!(
        event(
            "hostname1:25668:27396 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB primaryip:10.10.10.10<0>"
        ),
        Event::NetDevices {
            net: "IB",
            devices: vec![
                NetDevice {
                    index: 0,
                    name: "mlx5_0",
                    port: Some(1),
                    link: Some("RoCE")
                },
                NetDevice {
                    index: 1,
                    name: "mlx5_1",
                    port: Some(1),
                    link: Some("RoCE")
                },
            ]
        }
    );
    assert!(matches!(
        event("master_node:11715:11984 [0] NCCL INFO NET/Socket : Using [0]ib0:192.168.11.1<0>"),
        Event::NetDevices { net: "Socket", devices } if devices[0].name == "ib0"
    ));
    assert_eq!(
        event("h:1:2 [0] NCCL INFO NET/IB : No device found."),
        Event::NoDevice { net: "IB" }
    );
    assert_eq!(
        event("h:1:2 [0] NCCL INFO Failed to initialize NET plugin IB"),
        Event::NetInitFailed { name: "IB" }
    );
    assert_eq!(
        event("h:1:2 [0] NCCL INFO Using network AWS Libfabric"),
        Event::Network {
            name: "AWS Libfabric"
        }
    );
    assert_eq!(
        event("gh-3714u06:4052:4122 [0] NCCL INFO P2P plugin IBext_v8"),
        Event::Plugin { name: "IBext_v8" }
    );
    assert_eq!(
        event("master_node:11715:11984 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0."),
        Event::Env {
            name: "NCCL_IB_DISABLE",
            value: "0"
        }
    );
    assert_eq!(
        event("h:1:2 [0] NCCL INFO NCCL_IB_HCA set to mlx5"),
        Event::Env {
            name: "NCCL_IB_HCA",
            value: "mlx5"
        }
    );
    assert!(matches!(
        event("[0] NCCL INFO NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR"),
        Event::PluginGdrOff { .. }
    ));
    assert_eq!(
        event(
            "hostname1:25668:27396 [0] NCCL INFO comm 0x55cc8aa86c70 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1c000 commId 0x65e0bd6ee7449db4 - Init START"
        ),
        Event::CommInit {
            rank: 0,
            nranks: 16,
            cuda_dev: Some(0),
            bus_id: Some("1c000"),
            nnodes: None
        }
    );
    assert_eq!(
        event("h:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1"),
        Event::RingsGdr { pxn: 0, gdr: 1 }
    );
    assert!(matches!(
        event("xxx:16090:16180 [0] NCCL INFO CUDA Dev 0[0], IB NIC distance :  PIX NODE SYS SYS"),
        Event::NicDistance { gpu: "0[0]", net: "IB", levels } if levels == ["PIX", "NODE", "SYS", "SYS"]
    ));
}

#[test]
fn graph_path_lines() {
    // 2.28.9 on the one-GPU machine, NCCL_DEBUG_SUBSYS=ALL (REFERENCE.md section 9).
    let l = parse("h:1:2 [0] NCCL INFO GPU/0-60 :GPU/0-60 (0/5000.0/LOC) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) ").unwrap();
    assert_eq!(l.era, Era::since(23));
    let Event::GpuPaths {
        gpu,
        paths,
        truncated,
    } = l.event
    else {
        panic!("{:?}", l.event)
    };
    assert_eq!((gpu, truncated), ("0-60", false));
    assert_eq!(paths.len(), 3);
    assert_eq!(
        paths[2],
        PathTo {
            kind: "NET",
            id: "0-0",
            hops: 3,
            bw: 1.2,
            path: "PHB"
        }
    );
    // 2.6-2.20 (NVIDIA/nccl#879): no system id, the bandwidth with six decimals.
    let l = parse("resnet-p-worker-0:195626:198757 [0] NCCL INFO GPU/49000 :GPU/16000 (2/264.000000/NVL) GPU/49000 (0/5000.000000/LOC) CPU/0 (3/24.000000/PHB) CPU/1 (4/9.000000/SYS) NET/0 (6/24.000000/PHB) NET/2 (4/24.000000/PXB) NET/4 (7/9.000000/SYS)").unwrap();
    assert_eq!(l.era, Era::minors(6, 21));
    let Event::GpuPaths { gpu, paths, .. } = l.event else {
        panic!()
    };
    assert_eq!(gpu, "49000");
    let nets: Vec<(&str, &str)> = paths
        .iter()
        .filter(|p| p.kind == "NET")
        .map(|p| (p.id, p.path))
        .collect();
    assert_eq!(nets, [("0", "PHB"), ("2", "PXB"), ("4", "SYS")]);
    // 2.21-2.22 (NVIDIA/nccl#1519): the old header, the new entries.
    let l = parse("nathan-h100-1:13878:13953 [0] NCCL INFO GPU/B000 :GPU/0-4000 (2/370.8/NVL) GPU/0-b000 (0/5000.0/LOC) NVS/0-0 (1/370.8/NVL) CPU/0-0 (2/24.0/PHB) NET/0-0 (4/12.0/PHB) NET/0-5 (6/10.0/SYS)").unwrap();
    assert_eq!(l.era, Era::minors(21, 23));
    // Cut at NCCL's 1024 bytes (NVIDIA/nccl#1519 quotes one): what came before stands.
    let Event::GpuPaths {
        paths, truncated, ..
    } = event(
        "h:1:2 [0] NCCL INFO GPU/C000 :GPU/0-4000 (2/370.8/NVL) NET/0-3 (5/24.0/PHB) NET/0-4",
    )
    else {
        panic!()
    };
    assert!(truncated);
    assert_eq!(paths.len(), 2);
    // 2.5's numeric path types, the topology tree's GPU lines and `Paths from` (TRACE
    // builds) are not path lines.
    assert_eq!(
        event("h:1:2 [0] NCCL INFO GPU/1A000 :GPU/1A000 (0/5000/0) NET/0 (4/12/2)"),
        Event::Other
    );
    assert_eq!(event("h:1:2 [0] NCCL INFO GPU/0-60 (0)"), Event::Other);
    assert_eq!(
        event("h:1:2 [0] NCCL INFO Paths from GPU/0-60 :"),
        Event::Other
    );
}

#[test]
fn eras_read_as_people_say_them() {
    assert_eq!(Era::minors(12, 21).to_string(), "2.12-2.20");
    assert_eq!(Era::minors(29, 30).to_string(), "2.29");
    assert_eq!(Era::since(13).to_string(), "2.13 or later");
    assert_eq!(
        Era::minors(6, 24).intersect(Era::since(13)),
        Some(Era::minors(13, 24))
    );
    assert_eq!(Era::minors(4, 5).intersect(Era::since(13)), None);
}

#[test]
fn garbage_never_panics() {
    for l in [
        "NCCL INFO ",
        "NCCL INFO Channel",
        "NCCL INFO Channel 99999999999999 : x -> y [send] via NET/",
        "NCCL INFO Ring : -> [send] via NET//",
        "NCCL INFO GPU Direct RDMA Enabled for GPU/ - NET/ (",
        "NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA x '",
        "NCCL INFO NET/",
        "NCCL WARN",
        "] [ NCCL INFO comm rank",
        "::: [99999999999] NCCL INFO x",
        "NCCL version ",
        "NCCL INFO GPU/ :",
        "NCCL INFO GPU/0 : NET/ (",
        "NCCL INFO GPU/0 :NET/0 (1/x/PHB)",
        "NCCL INFO GPU/0 :NET/0 (99999999999/1.0/PHB)",
        "NCCL INFO NET/IB: Dev x qpn GID (",
        "NCCL INFO NET/IB: NCCL Dev 0 qpn 1 GID 99999999999999999999 (80FE/",
        "NCCL INFO RCCL version :",
        "NCCL INFO x [repeated",
        "NCCL INFO x [repeated 2x across cluster]\u{1b}[",
        "NCCL INFO [repeated 2x across cluster] [m",
        "h:1:2 [0] \u{e9}\u{e9} \u{e9} \u{e9} \u{e9} \u{e9} \u{e9} \u{e9} \u{e9} NCCL WARN x",
        "# NCCL WARN",
        "via NET/ -> [send]",
        " -> x via NET/IB/0",
        "RCCL version",
        "RCCL version : x",
        "\u{e9}GPU Direct RDMA \u{e9}NET/IB : ",
        "NET/IB : GPU Direct RDMA Disabled for HCA 0 '",
        "Connected all rings, use ring PXN",
        "#  Rank on",
        "#  Rank 0 Pid 1 on",
    ] {
        let _ = parse(l);
        let _ = parse_bare(l);
        let _ = undecorate(l);
        let _ = tests_rank_host(l);
        let _ = is_comment(l);
    }
    // Every cut of a real pasted line, at every character.
    let line = "\u{1b}[36m(RayWorkerWrapper pid=1)\u{1b}[0m h:1:2 [0] int f(g**):208 NCCL WARN NET/OFI x [repeated 2x across cluster]\u{1b}[0m";
    for (i, _) in line.char_indices() {
        let _ = parse(&line[..i]);
        let _ = parse_bare(&line[i..]);
        let _ = undecorate(&line[..i]);
    }
    let pair = "9[1a000] -> 2[6b000] [receive] via NET/IB/1(3)/GDRDMA(PCI)/Shared";
    for (i, _) in pair.char_indices() {
        let _ = parse_bare(&pair[..i]);
        let _ = parse_bare(&pair[i..]);
    }
}

#[test]
fn warning_sources_of_several_words() {
    // aws-ofi-nccl 1.13+ is C++: its warnings name the function with its signature.
    let l = parse("ip-10-0-1-5:79:2547 [0] int nccl_net_ofi_create_plugin(nccl_net_ofi_plugin_t**):208 NCCL WARN NET/OFI Failed to initialize sendrecv protocol").unwrap();
    assert_eq!(l.origin.host, Some("ip-10-0-1-5"));
    assert_eq!(l.origin.dev, Some(0));
    assert!(
        matches!(l.event, Event::Warn { text } if text == "NET/OFI Failed to initialize sendrecv protocol")
    );
    // aws/aws-ofi-nccl#889 (one word), behind CloudWatch's columns.
    let l = parse("  | 2025-05-16T16:39:55.218-07:00 | ip-10-36-29-253:86:2554 [0] nccl_net_ofi_create_plugin:335 NCCL WARN NET/OFI aws-ofi-nccl initialization failed").unwrap();
    assert_eq!(l.origin.host, Some("ip-10-36-29-253"));
    // No `[dev]` within reach: no host, no panic.
    let l = parse("a b c d e f g h i j k NCCL WARN x").unwrap();
    assert_eq!(l.origin, Origin::default());
}

#[test]
fn decorations_are_cut() {
    // awslabs/awsome-distributed-ai#386 (Ray folds repeated lines).
    let l = parse("(RayTrainWorker pid=954, ip=10.67.132.202) ini-worker-ray-worker-p5:954:3133 [6] NCCL INFO Using network Socket [repeated 15x across cluster]").unwrap();
    assert_eq!(l.event, Event::Network { name: "Socket" });
    // vllm-project/vllm#2734: the colours' escape bytes lost in the paste, and Ray's advice.
    let l = parse(" [36m(RayWorkerVllm pid=5310) [0m [pod-name]:5310:5433 [7] NCCL INFO P2P plugin IBext [32m [repeated 6x across cluster] [0m").unwrap();
    assert_eq!(l.event, Event::Plugin { name: "IBext" });
    assert_eq!(l.origin.host, Some("[pod-name]"));
    let l = parse("h:1:2 [7] NCCL INFO cudaDriverVersion 12010 [32m [repeated 6x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication.) [0m").unwrap();
    assert_eq!(l.message, "cudaDriverVersion 12010");
    // With the escape bytes.
    let l = parse("h:1:2 [7] NCCL INFO NET/IB : No device found.\u{1b}[32m [repeated 12x across cluster]\u{1b}[0m").unwrap();
    assert_eq!(l.event, Event::NoDevice { net: "IB" });
    // A message that ends in a bracket of its own is left alone.
    assert_eq!(
        undecorate("Trees [0] 1/-1/-1->0->7 [1]"),
        "Trees [0] 1/-1/-1->0->7 [1]"
    );
    assert_eq!(undecorate("x [repeated 3x across cluster] [0m"), "x");
    // `#` comments of a pasted configuration (ROCm setups note RCCL's lines beside settings).
    assert!(is_comment(
        "# VALIDATED!!  NCCL INFO Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1"
    ));
    assert!(!is_comment("h:1:2 [0] NCCL INFO # not a comment"));
}

#[test]
fn bodies_without_the_prefix() {
    // NVIDIA/nccl#897: a pair quoted without its head.
    let l = parse_bare("9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA").unwrap();
    assert!(l.bare);
    let Event::Connection(c) = l.event else {
        panic!()
    };
    assert_eq!(
        (c.channel, c.from, c.to, c.dev, c.gdr),
        (None, 9, 2, 0, true)
    );
    assert_eq!(l.era, Era::minors(5, 18));
    // ROCm/rocm-systems#4203: RCCL's topo_expl, with its own `[node:rank]`.
    let l =
        parse_bare("[0:3] GPU Direct RDMA Disabled for GPU 1 / HCA 3 (distance 8 > 5)").unwrap();
    assert!(matches!(
        l.event,
        Event::GpuGdr(GpuGdr {
            distance: 8,
            level: 5,
            ..
        })
    ));
    // The issue's examples: a full channel line and a per-HCA line.
    assert!(matches!(
        parse_bare("Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA")
            .unwrap()
            .event,
        Event::Connection(Connection {
            channel: Some(0),
            gdr: true,
            ..
        })
    ));
    assert!(matches!(
        parse_bare("'NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0''")
            .unwrap()
            .event,
        Event::HcaGdr {
            enabled: false,
            index: 0,
            ..
        }
    ));
    // RCCL's banner has no prefix of its own (rocmwrap.cc printf).
    let l = parse_bare("RCCL version : 2.21.5-HEAD:9a0e6a1").unwrap();
    assert_eq!(l.level, Level::Version);
    assert_eq!(
        l.event,
        Event::Version {
            version: Version::new(2, 21, 5),
            text: "2.21.5-HEAD:9a0e6a1",
            rccl: true
        }
    );
    // Prose that happens to say `NET/` is not a body.
    assert_eq!(parse_bare("see NET/IB in the docs"), None);
    assert_eq!(parse_bare("x -> y via NET/"), None);
    assert!(may_be_bare(b"9[1a000] -> 2[6b000] [receive] via NET/IB/1"));
    assert!(!may_be_bare(b"# Avg bus bandwidth    : 33.3227"));
}

#[test]
fn rccl_and_version_only_lines() {
    // ROCm/rccl-tests#163 (RCCL 2.21.5, ROCm 6.3).
    assert_eq!(
        event("z292:58192:58192 [3] NCCL INFO ROCr version 1.14"),
        Event::Rocr
    );
    assert!(matches!(
        event(
            "z292:58192:58192 [3] NCCL INFO Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1"
        ),
        Event::RcclDmabufOff { .. }
    ));
    assert_eq!(
        event("z292:58192:58200 [2] NCCL INFO Failed to open libibverbs.so[.1]"),
        Event::NoVerbs
    );
    // ROCm 7.2 prints the banner as INFO.
    assert!(matches!(
        event("TARS:829507:829507 [0] NCCL INFO RCCL version : 2.27.7-HEAD:0d2c4fd"),
        Event::Version { rccl: true, .. }
    ));
    // RCCL 2.20 and before.
    assert!(matches!(
        parse_bare("RCCL version 2.20.5+hip6.2 HEAD:d380693+").unwrap().event,
        Event::Version { version, text: "2.20.5+hip6.2", rccl: true } if version == Version::new(2, 20, 5)
    ));
    assert!(matches!(
        event("h:1:2 [5] NCCL INFO Found /sys/kernel/mm/memory_peers/amdkfd/version"),
        Event::PeerMemFound {
            path: "/sys/kernel/mm/memory_peers/amdkfd/version"
        }
    ));
    // NVIDIA/nccl#1657: a queue pair on GID 0, the link-local prefix (2.20+ wording).
    let l = parse("aigc-maas-instance-leader-0:88:159 [0] NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1047 mtu 5 query_ece={supported=1, vendor_id=0x15b3, options=0x0, comp_mask=0x0} GID 0 (80FE/1A8A41FEFF21A75E) fifoRkey=0x15e6c5 fifoLkey=0x15e6c5").unwrap();
    assert_eq!(
        l.event,
        Event::QpGid {
            dev: "0",
            index: 0,
            prefix: "80FE"
        }
    );
    assert_eq!(l.era, Era::since(20));
    // 2.19 (query_ece=, `Dev %d`); 2.12-2.18 (neither).
    let l = parse("h:1:2 [0] NCCL INFO NET/IB: Dev 3 Port 1 qpn 99 mtu 5 query_ece={supported=1, vendor_id=0x15b3, options=0x0, comp_mask=0x0} GID 3 (0/A0A0A0AFFFF0000)").unwrap();
    assert_eq!(l.era, Era::minors(19, 20));
    assert_eq!(
        l.event,
        Event::QpGid {
            dev: "3",
            index: 3,
            prefix: "0"
        }
    );
    // 2.27+: the network a communicator was given.
    let l = parse("h:1:2 [0] NCCL INFO Assigned NET plugin Socket to comm").unwrap();
    assert_eq!(
        (l.event, l.era),
        (Event::Network { name: "Socket" }, Era::since(27))
    );
    // nNodes (NVIDIA/nccl#1653).
    assert!(matches!(
        event(
            "DESKTOP-1CE5APL:1690:2801 [1] NCCL INFO comm 0x56168d375690 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0"
        ),
        Event::CommInit {
            nnodes: Some(1),
            ..
        }
    ));
    // aws-ofi-nccl's lines name the plugin.
    assert_eq!(
        event("algo-1:17773:17846 [0] NCCL INFO NET/OFI Setting NCCL_PROTO to \"simple\""),
        Event::Plugin { name: OFI_PLUGIN }
    );
    // nccl-tests' rank list.
    assert_eq!(
        tests_rank_host(
            "#  Rank  3 Group  0 Pid  58192 on       z292 device  3 [0000:c8:00] AMD Instinct MI50/MI60"
        ),
        Some("z292")
    );
    assert_eq!(
        tests_rank_host("#   Rank 15 Pid  65671 on nodeb device  7 [0xcf] NVIDIA A800"),
        Some("nodeb")
    );
    assert_eq!(tests_rank_host("# Rank of the matrix"), None);
}

/// The communicator lines' words, cut byte by byte, are `split_ascii_whitespace`'s (issue 43).
#[test]
fn ascii_words_are_split_ascii_whitespaces() {
    let pieces = [
        "comm",
        "0x55cc8aa86c70",
        "rank",
        "3",
        " ",
        "  ",
        "\t",
        "\r",
        "\x0c",
        "\n",
        "é",
        "\u{a0}",
        "nRanks",
        "busId",
        "1c000",
        "",
        "\u{3000}",
        "x\u{2028}y",
        "\u{b}",
    ];
    let mut seed = 17u64;
    for _ in 0..20_000 {
        let mut s = String::new();
        for _ in 0..(seed % 9) {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            s.push_str(pieces[(seed >> 33) as usize % pieces.len()]);
        }
        let ours: Vec<&str> = message::ascii_words(&s).collect();
        let std: Vec<&str> = s.split_ascii_whitespace().collect();
        assert_eq!(ours, std, "{s:?}");
    }
}

/// The communicator line read with the words cut byte by byte is what the same reading gives
/// with the words cut by `split_ascii_whitespace` (as before issue 43).
#[test]
fn comm_init_reads_as_it_did() {
    fn reference(m: &str) -> Option<Event<'_>> {
        message::comm_init_words(m.split_ascii_whitespace()).map(|(e, _)| e)
    }
    // Words, pairs and blanks to build the lines from, `|` between them.
    let pieces: Vec<&str> = "comm |ncclCommInitRank |rank |nranks |nRanks |cudaDev |busId |\
        nNodes |3 |+7 |-1 |99999999999 |1c000 |x| |\t|é |rank|0x55 |  |\u{a0}|localRank |\
        rank 3 |nranks 16 |nRanks 8\t|cudaDev 2 |busId 1c000 |nNodes 4 "
        .split('|')
        .collect();
    let mut seed = 43u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize
    };
    let mut read = 0;
    for _ in 0..50_000 {
        let mut m = String::from(["comm ", "ncclCommInitRank "][next() % 2]);
        for _ in 0..next() % 13 {
            m.push_str(pieces[next() % pieces.len()]);
        }
        let (event, _) = message::classify(&m);
        let expected = reference(&m);
        read += usize::from(expected.is_some());
        let got = Some(event).filter(|e| matches!(e, Event::CommInit { .. }));
        assert_eq!(got, expected, "{m:?}");
    }
    assert!(read > 1_000, "{read}");
}
