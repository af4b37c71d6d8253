//! NCCL's transport settings (issue 28), shown and judged by `nccl-config` on the healthy 8-GPU
//! RoCE node: from the declared job environment (`--nccl-env`) and /etc/nccl.conf, each with
//! its value, where NCCL reads it and what NCCL does with it; `NCCL_SOCKET_IFNAME` against the
//! node's interfaces, `NCCL_IB_HCA` against its RDMA devices.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;
use std::path::Path;

/// The one finding with `code` and `status` whose subject starts with `name=`.
fn about<'a>(
    r: &'a serde_json::Value,
    name: &str,
    code: &str,
    status: &str,
) -> &'a serde_json::Value {
    let all = findings_with(r, code);
    all.iter()
        .copied()
        .find(|f| {
            f["status"] == status
                && f["subject"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{name}="))
        })
        .unwrap_or_else(|| panic!("no {status} {code} about {name}: {:#?}", codes(r)))
}

fn message(f: &serde_json::Value) -> &str {
    f["message"].as_str().unwrap()
}

fn env_file(dir: &Path, lines: &str) -> String {
    let p = dir.join("prolog.env");
    std::fs::write(&p, lines).unwrap();
    p.to_str().unwrap().to_owned()
}

/// The cases, in the declared job environment a Slurm TaskProlog prints: an interface
/// the node lacks fails naming the ones it has; a timeout of 0 fails; an HCA list that selects
/// no device fails naming the devices; a leftover NCCL_IB_GDR_LEVEL warns and names its
/// successor. Each names the file and line it came from.
#[test]
fn declared_environment_cases() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    let dir = tempfile::tempdir().unwrap();
    let env = env_file(
        dir.path(),
        "export NCCL_SOCKET_IFNAME=bogus0\nexport NCCL_IB_TIMEOUT=0\nexport NCCL_IB_HCA=mlx9\nexport NCCL_IB_GDR_LEVEL=3\n",
    );
    let (c, r) = n.check(&["--nccl-env", &env], &["--select", "nccl-config"]);
    assert_eq!(c, 1);

    let f = about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-socket-ifname-unmatched",
        "fail",
    );
    let m = message(f);
    assert!(m.contains("prolog.env line 1"), "{m}");
    assert!(
        m.contains("matches none of the node's interfaces (ens1np0 (up), ens2np0 (up)"),
        "{m}"
    );
    assert!(
        m.contains("lo (unknown)") && m.contains("Bootstrap : no socket interface found"),
        "{m}"
    );
    assert!(f.to_string().contains("/sys/class/net"), "{f}");

    let m = message(about(&r, "NCCL_IB_TIMEOUT", "nccl-ib-timeout-bad", "fail"));
    assert!(
        m.contains("prolog.env line 2") && m.contains("no timeout at all"),
        "{m}"
    );

    let m = message(about(&r, "NCCL_IB_HCA", "nccl-hca-unmatched", "fail"));
    assert!(
        m.contains("selects none of the node's RDMA devices (this node has mlx5_0, mlx5_1"),
        "{m}"
    );

    let f = about(
        &r,
        "NCCL_IB_GDR_LEVEL",
        "nccl-ib-gdr-level-leftover",
        "warn",
    );
    assert!(
        message(f).contains("NCCL has not read NCCL_IB_GDR_LEVEL since 2.4"),
        "{f}"
    );
    assert!(
        f["fix"]["summary"]
            .as_str()
            .unwrap()
            .contains("NCCL_NET_GDR_LEVEL"),
        "{f}"
    );
}

/// Values outside the ranges the verbs fields hold, which NCCL passes on unchecked, from
/// /etc/nccl.conf: each its own finding, with the `sed` line that removes it; a value that is
/// not the number it looks like is said as strtoll reads it.
#[test]
fn values_out_of_range() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.write(
        "etc/nccl.conf",
        "NCCL_IB_TIMEOUT=32\nNCCL_IB_RETRY_CNT=8\nNCCL_IB_QPS_PER_CONNECTION=129\nNCCL_IB_SL=11\nNCCL_IB_TC=256\nNCCL_IB_FIFO_TC=-2\nNCCL_IB_ADAPTIVE_ROUTING=yes\nNCCL_SOCKET_IFNAME=ens1np0,bogus\n",
    );
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 1);
    let f = about(&r, "NCCL_IB_TIMEOUT", "nccl-ib-timeout-bad", "fail");
    assert!(
        message(f).contains("0-31") && message(f).contains("no timeout at all"),
        "{f}"
    );
    assert!(
        f["fix"]
            .to_string()
            .contains("gdrdoctor edit unset /etc/nccl.conf NCCL_IB_TIMEOUT"),
        "{f}"
    );
    let m = message(about(
        &r,
        "NCCL_IB_RETRY_CNT",
        "nccl-ib-retry-cnt-bad",
        "fail",
    ));
    assert!(m.contains("0-7"), "{m}");
    let m = message(about(
        &r,
        "NCCL_IB_QPS_PER_CONNECTION",
        "nccl-ib-qps-bad",
        "fail",
    ));
    assert!(m.contains("at most 128 queue pairs"), "{m}");
    let m = message(about(&r, "NCCL_IB_SL", "nccl-ib-sl-bad", "warn"));
    assert!(
        m.contains("mlx5_0 port 1") && m.contains("carries priority 3"),
        "{m}"
    );
    let m = message(about(&r, "NCCL_IB_TC", "nccl-ib-tc-bad", "fail"));
    assert!(m.contains("256 becomes 0"), "{m}");
    let m = message(about(&r, "NCCL_IB_FIFO_TC", "nccl-ib-tc-bad", "fail"));
    assert!(
        m.contains("-2 becomes 254") && m.contains("control messages"),
        "{m}"
    );
    let f = about(
        &r,
        "NCCL_IB_ADAPTIVE_ROUTING",
        "nccl-conf-line-ignored",
        "warn",
    );
    assert!(
        message(f).contains("NCCL reads \"yes\" as the number 0") && message(f).contains("off"),
        "{f}"
    );
    assert!(
        f["fix"]
            .to_string()
            .contains("gdrdoctor edit set /etc/nccl.conf NCCL_IB_ADAPTIVE_ROUTING=0"),
        "{f}"
    );
    let m = message(about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-socket-ifname-unmatched",
        "warn",
    ));
    assert!(
        m.contains("names bogus that the node lacks") && m.contains("NCCL takes ens1np0 (up)"),
        "{m}"
    );
}

/// Values NCCL takes, shown with what it does with them (a pass each); a retry count of 0, no
/// queue pairs, a service level past 15, and an interface that is down.
#[test]
fn values_shown_and_the_rest_judged() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.write(
        "etc/nccl.conf",
        "NCCL_IB_TIMEOUT=22\nNCCL_IB_TC=106\nNCCL_IB_QPS_PER_CONNECTION=4\nNCCL_IB_ADAPTIVE_ROUTING=1\nNCCL_SOCKET_IFNAME=ens\n",
    );
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 0, "{:#?}", codes(&r));
    let pass = |name| message(about(&r, name, "nccl-transport-setting", "pass")).to_owned();
    let m = pass("NCCL_IB_TIMEOUT");
    assert!(
        m.contains("/etc/nccl.conf line 1") && m.contains("each try waits 17.2 s"),
        "{m}"
    );
    assert!(
        m.contains("with 7 retries a queue pair gives up on a lost peer after about 2.3 min"),
        "{m}"
    );
    let m = pass("NCCL_IB_TC");
    assert!(m.contains("DSCP 26 (TC >> 2)"), "{m}");
    assert!(pass("NCCL_IB_QPS_PER_CONNECTION").contains("4 queue pairs per NIC"));
    assert!(pass("NCCL_IB_ADAPTIVE_ROUTING").contains("on for every port"));
    let m = pass("NCCL_SOCKET_IFNAME");
    assert!(
        m.contains("it selects ens1np0 (up), ens2np0 (up)") && !m.contains("lo (unknown)"),
        "{m}"
    );

    n.write(
        "etc/nccl.conf",
        "NCCL_IB_RETRY_CNT=0\nNCCL_IB_QPS_PER_CONNECTION=0\nNCCL_IB_SL=16\nNCCL_SOCKET_IFNAME==ens1np0\n",
    );
    n.write("sys/class/net/ens1np0/operstate", "down\n");
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 1);
    let m = message(about(
        &r,
        "NCCL_IB_RETRY_CNT",
        "nccl-ib-retry-cnt-bad",
        "warn",
    ));
    assert!(m.contains("never retransmit"), "{m}");
    let m = message(about(
        &r,
        "NCCL_IB_QPS_PER_CONNECTION",
        "nccl-ib-qps-bad",
        "fail",
    ));
    assert!(m.contains("does not exist"), "{m}");
    let m = message(about(&r, "NCCL_IB_SL", "nccl-ib-sl-bad", "fail"));
    assert!(m.contains("0-15"), "{m}");
    let m = message(about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-socket-ifname-down",
        "fail",
    ));
    assert!(
        m.contains("matches only ens1np0 (down)") && m.contains("ens2np0 (up)"),
        "{m}"
    );
}

/// NCCL reads NCCL_SOCKET_IFNAME only when it is longer than one character; an exclusion list
/// that leaves the RDMA netdevs is taken as it is.
#[test]
fn short_and_excluding_interface_lists() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.write("etc/nccl.conf", "NCCL_SOCKET_IFNAME=e\n");
    let (_, r) = n.check(&[], &["--select", "nccl-config"]);
    let m = message(about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-conf-line-ignored",
        "warn",
    ));
    assert!(m.contains("longer than one character"), "{m}");
    n.write("etc/nccl.conf", "NCCL_SOCKET_IFNAME=^=lo\n");
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 0, "{:#?}", codes(&r));
    let m = message(about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-transport-setting",
        "pass",
    ));
    assert!(m.contains("ens8np0 (up)") && !m.contains("lo ("), "{m}");
}

/// `gdrdoctor nccl` on the RoCE node, by the NCCL release: not known on a captured root (the pin
/// is written for older releases, and it is what 2.21 and later pick themselves); 2.21 and
/// later pick the GID themselves, so no pin, with what NCCL picks on each port; before 2.21, the
/// pin.
#[test]
fn gid_index_by_release() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    let root = n.root.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--root", root, "nccl"];
        args.extend(extra);
        stdout(&gdrdoctor(&args))
    };
    let out = run(&[]);
    assert!(
        out.contains("# NCCL's version is not known: a captured root holds no libnccl to ask"),
        "{out}"
    );
    assert!(
        out.contains("it is the index 2.21 and later pick themselves on every port used"),
        "{out}"
    );
    assert!(out.contains("export NCCL_IB_GID_INDEX='3'"), "{out}");

    let out = run(&["--nccl-version", "2.28.9"]);
    assert!(out.contains("# NCCL 2.28.9 (--nccl-version)\n"), "{out}");
    assert!(out.contains("# NCCL_IB_GID_INDEX not set"), "{out}");
    assert!(
        out.contains("NVIDIA advises leaving NCCL_IB_GID_INDEX unset from 2.21"),
        "{out}"
    );
    assert!(
        out.contains("mlx5_0 port 1: NCCL picks index 3, RoCE v2 192.168.1.1 on ens1np0"),
        "{out}"
    );
    assert!(!out.contains("NCCL_IB_GID_INDEX=3"), "{out}");

    let out = stdout(&gdrdoctor(&[
        "--root",
        root,
        "nccl",
        "settings",
        "--nccl-version",
        "2.20",
    ]));
    assert!(
        out.contains("NCCL 2.20 (--nccl-version) predates 2.21: without NCCL_IB_GID_INDEX it uses GID index 0"),
        "{out}"
    );
    assert!(out.contains("export NCCL_IB_GID_INDEX='3'"), "{out}");
    let bad = gdrdoctor(&["--root", root, "nccl", "--nccl-version", "2.x"]);
    assert_eq!(code(&bad), 2);
}

/// With 2.21 and later, a pin only where NCCL's own pick is wrong: a vxlan stacked on mlx5_0's
/// bond has its IPv4 GID first in the table (index 3), so NCCL would take the vxlan's; the bond's
/// own is at 5, and that is pinned.
#[test]
fn gid_index_pinned_where_nccls_pick_is_wrong() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.vxlan_stacked_on_bond();
    n.write("etc/nccl.conf", "NCCL_IB_HCA==mlx5_0\n");
    let root = n.root.to_str().unwrap();
    let out = stdout(&gdrdoctor(&[
        "--root",
        root,
        "nccl",
        "--nccl-version",
        "2.23.4",
    ]));
    assert!(
        out.contains("NCCL 2.23.4 (--nccl-version) picks the RoCE GID itself, and its pick is wrong on 1 of the 1 RoCE ports used, so this pin overrides it"),
        "{out}"
    );
    assert!(
        out.contains("mlx5_0 port 1: NCCL picks index 3, RoCE v2 10.200.0.5 on vxlan100: wrong, it belongs to vxlan100, stacked on the port's own netdev bond0, whose GID is at index 5"),
        "{out}"
    );
    assert!(out.contains("export NCCL_IB_GID_INDEX='5'"), "{out}");
}

/// On the live node, the release is what `ncclGetVersion` of the library NCCL's run would load
/// answers (the stand-in libnccl here, as `nccl verify` finds it).
#[test]
fn release_asked_of_the_library() {
    for (code, version) in [("22809", "2.28.9"), ("22005", "2.20.5")] {
        let out = Gdrdoctor::new()
            .args(["nccl"])
            .env("GDRDOCTOR_LIBNCCL", stub("nccl", &[]))
            .env("FAKE_NCCL_VERSION", code)
            .command()
            .output()
            .unwrap();
        let s = stdout(&out);
        assert!(
            s.contains(&format!("# NCCL {version} (ncclGetVersion of ")),
            "{s}\n{}",
            stderr(&out)
        );
    }
}

/// `NCCL_IB_HCA` on a node with no RDMA device at all (the real 2x H200 capture): the setting
/// counted on devices that are missing, said beside rdma-link's own finding; an exclusion list
/// expects nothing and says nothing.
#[test]
fn hca_list_on_a_node_without_rdma_devices() {
    let dir = tempfile::tempdir().unwrap();
    let root = fixture_path("h200x2-vm");
    let run = |line: &str| {
        let env = env_file(dir.path(), line);
        let out = gdrdoctor(&[
            "--root",
            root.to_str().unwrap(),
            "check",
            "--select",
            "nccl-config",
            "--nccl-env",
            &env,
            "--format",
            "json",
        ]);
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
        json(&out)
    };
    let r = run("export NCCL_IB_HCA=mlx5_0,mlx5_1\n");
    let f = about(&r, "NCCL_IB_HCA", "nccl-hca-unmatched", "warn");
    assert!(
        message(f).contains("names mlx5_0, mlx5_1 but the node has no RDMA device"),
        "{f}"
    );
    assert!(f.to_string().contains("/sys/class/infiniband"), "{f}");
    assert!(
        f["fix"]["summary"].as_str().unwrap().contains("rdma-link"),
        "{f}"
    );
    let r = run("export NCCL_IB_HCA=^mlx5_3\n");
    assert!(findings_with(&r, "nccl-hca-unmatched").is_empty(), "{r}");
}

/// Issue 40: an exclusion list that leaves only the loopback interface (`^ens` on a node of ens*
/// and lo). NCCL takes lo and bootstraps over 127.0.0.1, which no other node reaches: "`lo` is
/// loopback so you won't be able to use it between two nodes" (NVIDIA/nccl#286,
/// https://github.com/NVIDIA/nccl/issues/286); NVIDIA/nccl#1053 shows lo taken at 127.0.0.1 even
/// with a global /32 on it. Where lo is selected beside other interfaces it comes first (index 1):
/// horovod/horovod#584 (https://github.com/horovod/horovod/issues/584) logs `NET : Using interface
/// lo:127.0.0.1<0>` before eth0 and then `Call to connect timeout : Connection refused`.
#[test]
fn a_list_that_selects_loopback() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.write("etc/nccl.conf", "NCCL_SOCKET_IFNAME=^ens\n");
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 1, "{:#?}", codes(&r));
    let f = about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-socket-ifname-loopback",
        "fail",
    );
    let m = message(f);
    assert!(
        m.contains("selects only lo (unknown), the loopback interface") && m.contains("127.0.0.1"),
        "{m}"
    );
    assert!(f["fix"].to_string().contains("^ens,lo"), "{}", f["fix"]);
    // lo beside a real interface: NCCL takes lo first; a warning.
    n.write("etc/nccl.conf", "NCCL_SOCKET_IFNAME=lo,ens1np0\n");
    let (_, r) = n.check(&[], &["--select", "nccl-config"]);
    let m = message(about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-socket-ifname-loopback",
        "warn",
    ));
    assert!(
        m.contains("the loopback interface is the first (index 1)"),
        "{m}"
    );
    // Excluding lo too passes.
    n.write("etc/nccl.conf", "NCCL_SOCKET_IFNAME=^ens2,lo\n");
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 0, "{:#?}", codes(&r));
}

/// Issue 40: an interface that is up but has no address is never taken by NCCL (getifaddrs lists
/// addresses, not interfaces). Addresses come from the root's /proc/net: the main table's routes
/// (net/ipv4/fib_trie.c `fib_route_seq_show`) and `if_inet6` (net/ipv6/addrconf.c).
#[test]
fn an_interface_without_an_address() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.write(
        "proc/net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
         ens2np0\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n",
    );
    n.write(
        "proc/net/if_inet6",
        "00000000000000000000000000000001 01 80 10 80       lo\n",
    );
    n.write("etc/nccl.conf", "NCCL_SOCKET_IFNAME=ens1np0\n");
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 1, "{:#?}", codes(&r));
    let f = about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-socket-ifname-no-address",
        "fail",
    );
    assert!(
        message(f).contains("selects ens1np0 (up), up but without an IPv4 or IPv6 address"),
        "{}",
        message(f)
    );
    assert!(
        f["evidence"].to_string().contains(
            "ens1np0: no IPv4 route in /proc/net/route and no IPv6 address in /proc/net/if_inet6"
        ),
        "{}",
        f["evidence"]
    );
    n.write("etc/nccl.conf", "NCCL_SOCKET_IFNAME=ens1np0,ens2np0\n");
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 0, "{:#?}", codes(&r));
    let m = message(about(
        &r,
        "NCCL_SOCKET_IFNAME",
        "nccl-transport-setting",
        "pass",
    ));
    assert!(
        m.contains("it selects ens2np0 (up) and skips ens1np0 (no address)")
            && m.contains("ens2np0: 1 IPv4 route(s) in /proc/net/route"),
        "{m}"
    );
}

/// Issue 40: NCCL_IB_TIMEOUT=4 is 65.5 us a try: under load ACKs are later than that, the retries
/// run out and the job fails with error 12 (NVIDIA/nccl#902,
/// https://github.com/NVIDIA/nccl/issues/902: "lower down the NCCL_IB_TIMEOUT=1 and
/// NCCL_IB_RETRY_CNT=0, with the ib_write_bw large network flow ... this problem can quickly
/// occur"; NCCL's answer: "increasing NCCL_IB_TIMEOUT can help"). A warning; 12 and up pass.
#[test]
fn a_short_ib_timeout_warns() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.write("etc/nccl.conf", "NCCL_IB_TIMEOUT=4\n");
    let (c, r) = n.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 0, "{:#?}", codes(&r));
    let f = about(&r, "NCCL_IB_TIMEOUT", "nccl-ib-timeout-bad", "warn");
    let m = message(f);
    assert!(
        m.contains("each try waits only 66 us") && m.contains("error 12"),
        "{m}"
    );
    assert!(
        f["fix"].to_string().contains("NCCL_IB_TIMEOUT"),
        "{}",
        f["fix"]
    );
    n.write("etc/nccl.conf", "NCCL_IB_TIMEOUT=12\n");
    let (_, r) = n.check(&[], &["--select", "nccl-config"]);
    about(&r, "NCCL_IB_TIMEOUT", "nccl-transport-setting", "pass");
}

/// Issue 40: NCCL_IB_PCI_RELAXED_ORDERING, which Azure's NDv4 image sets (the `azure-ndv4-vm`
/// fixture's nccl.conf, from Azure's published azhpc-images), is shown; 0 in that VM warns: NCCL's
/// own documentation says Relaxed Ordering "can greatly help the performance of InfiniBand
/// networks in virtualized environments" (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html).
/// NCCL_P2P_LEVEL=LOC, as the WSL user of NVIDIA/nccl#1653 ran it (fixtures/nccl-logs/
/// nccl-1653-wsl-single-node.log: `NCCL_P2P_LEVEL set by environment to LOC`), warns: the GPUs
/// then talk through host memory.
#[test]
fn relaxed_ordering_and_p2p_level_shown_and_judged() {
    let n = NodeCopy::of("azure-ndv4-vm-topo");
    let (_, r) = n.check(&[], &["--select", "nccl-config"]);
    let m = message(about(
        &r,
        "NCCL_IB_PCI_RELAXED_ORDERING",
        "nccl-transport-setting",
        "pass",
    ))
    .to_owned();
    assert!(m.contains("forced on"), "{m}");
    let conf = std::fs::read_to_string(n.root.join("etc/nccl.conf")).unwrap();
    n.write(
        "etc/nccl.conf",
        format!(
            "{}NCCL_P2P_LEVEL=LOC\n",
            conf.replace(
                "NCCL_IB_PCI_RELAXED_ORDERING=1",
                "NCCL_IB_PCI_RELAXED_ORDERING=0"
            )
        ),
    );
    let (_, r) = n.check(&[], &["--select", "nccl-config"]);
    let f = about(
        &r,
        "NCCL_IB_PCI_RELAXED_ORDERING",
        "nccl-ib-relaxed-ordering-off",
        "warn",
    );
    assert!(message(f).contains("virtual machine"), "{}", message(f));
    let f = about(&r, "NCCL_P2P_LEVEL", "nccl-p2p-off", "warn");
    assert!(message(f).contains("through host memory"), "{}", message(f));
    assert!(f["fix"].to_string().contains("Remove NCCL_P2P_LEVEL"));
    // On bare metal, 0 is shown, not judged; PXB is shown.
    let m2 = NodeCopy::of("healthy-8gpu-roce");
    m2.write(
        "etc/nccl.conf",
        "NCCL_IB_PCI_RELAXED_ORDERING=0\nNCCL_P2P_LEVEL=PXB\n",
    );
    let (c, r) = m2.check(&[], &["--select", "nccl-config"]);
    assert_eq!(c, 0, "{:#?}", codes(&r));
    assert!(
        message(about(
            &r,
            "NCCL_P2P_LEVEL",
            "nccl-transport-setting",
            "pass"
        ))
        .contains("up to PXB")
    );
}
