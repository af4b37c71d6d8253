//! Every fixture (except the broken corpus, tests/broken.rs) checked end to end: exit code, every
//! check's status, the codes that must appear, and whole-report snapshots in both formats. And the
//! fixtures themselves: what each generated or captured tree holds (a snapshot per fixture, in
//! place of committed trees) and the committed FIXTURE.md files equal to the generator's.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;

struct Case {
    name: &'static str,
    /// A config file inside the fixture, for fixtures that need one (declared accelerators).
    config: Option<&'static str>,
    exit: i32,
    /// In CHECKS order.
    statuses: [&'static str; 10],
    /// (code, status) pairs that must be in the report.
    codes: &'static [(&'static str, &'static str)],
}

const CHECKS: [&str; 10] = [
    "gpu-driver",
    "gpu",
    "peer-memory",
    "pcie-placement",
    "acs",
    "pcie-link",
    "iommu",
    "rdma-link",
    "rdma-gid",
    "rdma-access",
];

const CASES: &[Case] = &[
    // The real H200 VM capture: no RDMA device, but the DMA-BUF path is the one it could use.
    Case {
        name: "h200x2-vm",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "skip", "skip", "pass", "pass", "fail", "skip", "skip",
        ],
        codes: &[
            ("gpu-driver-bound", "pass"),
            ("gpu-ready", "pass"),
            ("gpu-probe-skipped", "skip"),
            ("gdr-path-dmabuf", "pass"),
            ("iommu-off", "pass"),
            ("rdma-no-device", "fail"),
            ("rdma-gid-no-device", "skip"),
        ],
    },
    // The real 4x H100 VM capture with NVML's answer recorded: every GPU ready (persistence
    // on, 18 NVLinks up, fabric Completed), no RDMA device.
    Case {
        name: "h100x4-vm",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "skip", "skip", "pass", "pass", "fail", "skip", "skip",
        ],
        codes: &[
            ("gpu-driver-bound", "pass"),
            ("gpu-ready", "pass"),
            ("gpu-probe-skipped", "skip"),
            ("gdr-path-dmabuf", "pass"),
            ("rdma-no-device", "fail"),
        ],
    },
    // Its recorded NVML answer edited: persistence mode off on every GPU.
    Case {
        name: "h100x4-persistence-off",
        config: None,
        exit: 1,
        statuses: [
            "pass", "warn", "pass", "skip", "skip", "pass", "pass", "fail", "skip", "skip",
        ],
        codes: &[("gpu-persistence-off", "warn"), ("rdma-no-device", "fail")],
    },
    // NVLinks 6 and 7 of GPU 0000:00:08.0 down; the other GPUs ready.
    Case {
        name: "h100x4-nvlink-down",
        config: None,
        exit: 1,
        statuses: [
            "pass", "warn", "pass", "skip", "skip", "pass", "pass", "fail", "skip", "skip",
        ],
        codes: &[("gpu-nvlink-down", "warn"), ("gpu-ready", "pass")],
    },
    // The fabric state In Progress on every GPU: Fabric Manager not done.
    Case {
        name: "h100x4-fabric-in-progress",
        config: None,
        exit: 1,
        statuses: [
            "pass", "fail", "pass", "skip", "skip", "pass", "pass", "fail", "skip", "skip",
        ],
        codes: &[("gpu-fabric-not-ready", "fail")],
    },
    Case {
        name: "healthy-8gpu-roce",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-dmabuf", "pass"),
            ("iommu-passthrough", "pass"),
            ("rdma-port-active", "pass"),
            ("roce-v2-ipv4", "pass"),
        ],
    },
    Case {
        name: "healthy-4gpu-ib-peermem",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-peermem", "pass"),
            ("iommu-off", "pass"),
            ("ib-lid-assigned", "pass"),
        ],
    },
    Case {
        name: "amd-mi300x-roce",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-dmabuf", "pass"),
            ("iommu-passthrough", "pass"),
            ("roce-v2-ipv4", "pass"),
        ],
    },
    Case {
        name: "amd-no-gdr-path",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("amd-no-gdr-path", "fail")],
    },
    Case {
        name: "peermem-missing-proprietary",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("peermem-not-loaded", "fail")],
    },
    Case {
        name: "peermem-unregistered",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("peermem-not-registered", "fail")],
    },
    Case {
        name: "iommu-translated",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "fail", "pass", "pass", "skip",
        ],
        codes: &[("iommu-translated", "fail")],
    },
    Case {
        name: "rdma-port-down",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "pass", "skip",
        ],
        codes: &[("rdma-port-down", "fail"), ("rdma-port-active", "pass")],
    },
    Case {
        name: "roce-v1-only",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "skip",
        ],
        codes: &[("roce-v1-only", "fail")],
    },
    Case {
        name: "roce-gid-index-differs",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "warn", "skip",
        ],
        codes: &[("roce-gid-index-differs", "warn"), ("roce-v2-ipv4", "pass")],
    },
    Case {
        name: "roce-mtu-1500",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "warn", "pass", "skip",
        ],
        codes: &[("roce-mtu-small", "warn")],
    },
    Case {
        name: "ib-no-sm",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "fail", "skip",
        ],
        codes: &[("rdma-port-init", "fail"), ("ib-no-lid", "fail")],
    },
    Case {
        name: "roce-no-ip",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "skip",
        ],
        codes: &[("roce-no-ip-gid", "fail"), ("roce-v2-ipv4", "pass")],
    },
    Case {
        name: "roce-ipv6-only",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "warn", "skip",
        ],
        codes: &[("roce-no-ipv4-gid", "warn")],
    },
    // aarch64 with SMMUv3 in strict mode on a 6.8 kernel: translated is what NVIDIA recommends
    // on Grace, so it passes (issue 38); no passthrough is suggested (it broke CUDA before 6.11).
    Case {
        name: "arm64-iommu-translated",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "unknown", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        // A GH200 joined to its Grace by NVLink-C2C: whether NCCL uses GDR to the ConnectX-7
        // of its Grace depends on the release, and the node has no NCCL to read it from.
        codes: &[
            ("iommu-smmu-translated", "pass"),
            ("gpu-nic-c2c-release-unknown", "unknown"),
            ("acs-as-nvidia-requires", "pass"),
            ("grace-iommu-groups-as-required", "pass"),
        ],
    },
    // A real-kernel capture from the lab VM (tests/lab, scenario switch-pt): Soft-RoCE on an
    // e1000e behind a PCIe switch, a virtio GPU declared an accelerator.
    Case {
        name: "lab-switch-pt",
        config: Some("config.yaml"),
        exit: 0,
        statuses: [
            "pass", "skip", "unknown", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-unknown", "unknown"),
            ("rdma-port-active", "pass"),
            ("roce-v2-ipv4", "pass"),
            ("iommu-passthrough", "pass"),
        ],
    },
    // Placement and ACS, one property at a time (fixtures/synth; FIXTURE.md gives the paths).
    Case {
        name: "placement-pix",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-nic-near", "pass"),
            ("acs-clear", "pass"),
            ("pcie-link-full", "pass"),
        ],
    },
    Case {
        name: "placement-pxb",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-near", "pass")],
    },
    Case {
        name: "placement-phb",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-too-far", "fail")],
    },
    Case {
        name: "placement-node",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-too-far", "fail")],
    },
    Case {
        name: "placement-sys",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-too-far", "fail")],
    },
    Case {
        name: "acs-redirect-on-path",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("acs-redirect-on-path", "fail"), ("acs-clear", "pass")],
    },
    Case {
        name: "acs-redirect-off-path",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("acs-clear", "pass")],
    },
    Case {
        name: "config-unprivileged",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "unknown", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-near", "pass"), ("acs-unknown", "unknown")],
    },
    Case {
        name: "caplist-loop",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("acs-clear", "pass")],
    },
    Case {
        name: "placement-pileup",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-near", "pass")],
    },
    Case {
        name: "link-downtrained",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "warn", "pass", "pass", "pass", "skip",
        ],
        codes: &[("pcie-link-narrow", "warn"), ("pcie-link-slow", "warn")],
    },
    // Azure ND A100 v4 as its guest sees it (issue 16): every GPU and NIC its own Hyper-V vPCI
    // domain. Without the image's files every pair is NODE from inside, and the fix names the
    // provider's topology file; with them NCCL's tree puts each GPU and its NICs at PIX.
    Case {
        name: "azure-ndv4-vm",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "skip", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-too-far", "fail"), ("nccl-defaults", "pass")],
    },
    Case {
        name: "azure-ndv4-vm-topo",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "skip", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-nic-near", "pass"),
            ("nccl-setting", "pass"),
            ("nccl-topo-file-ok", "pass"),
        ],
    },
    Case {
        name: "gpu-no-driver",
        config: None,
        exit: 1,
        statuses: [
            "fail", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-no-driver", "fail"), ("gpu-nouveau", "fail")],
    },
    // Workstation GPUs in display mode: BAR1 256 MiB.
    Case {
        name: "gpu-bar-small",
        config: None,
        exit: 1,
        statuses: [
            "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-bar-small", "fail"), ("gpu-probe-skipped", "skip")],
    },
    // An MI300X bound to amdgpu but missing from the KFD topology.
    Case {
        name: "amd-kfd-missing-gpu",
        config: None,
        exit: 1,
        statuses: [
            "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-not-seen-by-driver", "fail"), ("gpu-ready", "pass")],
    },
    // A recorded sample window in which no counter moved.
    Case {
        name: "link-healthy-sampled",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("link-quiet", "pass"), ("aer-quiet", "pass")],
    },
    // link_downed and carrier_changes grow in the recorded window: a flap.
    Case {
        name: "link-flapping",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("link-flapping", "fail"), ("link-quiet", "pass")],
    },
    // NCCL_IB_TC=106 -> DSCP 26 -> trust dscp -> priority 3 -> PFC on 3 (issue 28).
    Case {
        name: "roce-lossless-ok",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-lossless-ok", "pass")],
    },
    // PFC on 4, NCCL's traffic on 3: a lossy queue.
    Case {
        name: "roce-pfc-off-on-nccl-priority",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-pfc-off", "fail")],
    },
    // PCP trust: untagged RoCE on priority 0, which has no PFC.
    Case {
        name: "roce-trust-pcp-untagged",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-trust-pcp", "fail")],
    },
    // PCP trust, RoCE tagged over VLANs named vlan5..vlan12 (the kernel says VLAN, the names do
    // not), NCCL_IB_SL=3: priority 3, which has PFC (issue 40).
    Case {
        name: "roce-trust-pcp-vlan",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-lossless-ok", "pass")],
    },
    // MLNX_OFED's Global tclass=106 beside NCCL_IB_TC unset.
    Case {
        name: "roce-ofed-tclass-override",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("roce-tclass-override", "warn"),
            ("roce-lossless-ok", "pass"),
        ],
    },
    // 802.3x pause on beside PFC.
    Case {
        name: "roce-global-pause-and-pfc",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-global-pause", "fail")],
    },
    // No DCB interface: unknown, never a pass.
    Case {
        name: "roce-no-dcb-driver",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-qos-unknown", "unknown")],
    },
    // Older MLNX_OFED: trust and the DSCP map in its own files; the map moves NCCL's DSCP off
    // the PFC priority.
    Case {
        name: "roce-ofed-dscp2prio",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-pfc-off", "fail")],
    },
    // The upstream driver: the CNPs' DSCP from debugfs, on NCCL's own priority.
    Case {
        name: "roce-upstream-cnp-shared",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-cnp-shared", "warn"), ("roce-lossless-ok", "pass")],
    },
    // InfiniBand: no PFC or DSCP to judge.
    Case {
        name: "ib-qos-not-applicable",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("roce-qos-not-applicable", "skip")],
    },
    // The kernel's log (issue 27): GPU 2's Xid 79 warns; GPU 0's Xid 13 and probe-time
    // bandwidth note are history.
    Case {
        name: "kernel-log-xid",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("kernel-log-xid", "warn"), ("kernel-log-history", "skip")],
    },
    // mlx5 firmware command timeouts (openucx/ucx#7738) and nvidia_peermem's failed loads
    // (NVIDIA/gpu-operator#2868).
    Case {
        name: "kernel-log-nic-peermem",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("kernel-log-nic-errors", "warn"),
            ("kernel-log-peermem-errors", "warn"),
        ],
    },
    // Captured without root: the log is unknown, never a pass.
    Case {
        name: "kernel-log-unreadable",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("kernel-log-unreadable", "unknown")],
    },
    // Symbol, receive and CRC errors grow in the window while the link stays up.
    Case {
        name: "link-symbol-errors",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("link-errors-growing", "warn")],
    },
    // One reading with a port's lifetime errors: shown, not judged.
    Case {
        name: "link-history",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("link-history", "skip"),
            ("link-clean", "pass"),
            ("aer-clean", "pass"),
        ],
    },
    // Non-fatal AER errors grow on the switch port above a GPU-NIC pair.
    Case {
        name: "aer-nonfatal-switch-port",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("aer-uncorrectable-growing", "fail"),
            ("kernel-log-pcie-uncorrected", "warn"),
            ("kernel-log-errors-now", "fail"),
        ],
    },
    // rdma-port-down with NCCL_IB_HCA leaving the down NIC out: ready.
    Case {
        name: "rdma-port-excluded-down",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("rdma-port-unused-down", "skip"),
            ("rdma-gid-port-unused", "skip"),
            ("link-port-not-active", "skip"),
        ],
    },
    // healthy-8gpu-roce with another cluster's /etc/nccl.conf (issue 28): the bootstrap
    // interface it names is not on this node, and its queue pairs would never time out.
    Case {
        name: "nccl-transport-misset",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("nccl-socket-ifname-unmatched", "fail"),
            ("nccl-ib-timeout-bad", "fail"),
            ("nccl-ib-gdr-level-leftover", "warn"),
            ("nccl-transport-setting", "pass"),
        ],
    },
    // Dual-port NICs whose second port is Disabled, no NCCL_IB_HCA: ready.
    Case {
        name: "rdma-second-port-disabled",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("rdma-port-disabled", "skip"),
            ("rdma-gid-port-unused", "skip"),
        ],
    },
    // GPU 0's nearest NIC is down (Polling) while a farther one is up.
    Case {
        name: "rail-down",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "pass", "skip",
        ],
        codes: &[("rdma-port-down", "fail"), ("rdma-rail-down", "warn")],
    },
    // Cloud GPU fabrics as NCCL sees them (issue 29). AWS p4d.24xlarge with aws-ofi-nccl and its
    // topology file: EFA judged as EFA (its GID slot, its P2P provider), placement on the
    // plugin's file (PIX); ready.
    Case {
        name: "aws-p4d-efa-topo",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "skip", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-efa-p2p", "pass"),
            ("efa-address", "pass"),
            ("nccl-net-plugin", "pass"),
            ("nccl-topo-file-ok", "pass"),
            ("gpu-nic-near", "pass"),
        ],
    },
    // The same node without the plugin's topology file: PHB from sysfs, worded as a VM, the fix
    // naming the file aws-ofi-nccl sets itself.
    Case {
        name: "aws-p4d-efa",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "skip", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-nic-too-far", "fail"),
            ("nccl-topo-file-missing", "warn"),
            ("efa-address", "pass"),
        ],
    },
    // AWS p5.48xlarge: 32 EFA, four per GPU under one switch: ready, EFA judged as EFA.
    Case {
        name: "aws-p5-efa",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-nic-near", "pass"),
            ("efa-address", "pass"),
            ("rdma-port-active", "pass"),
            ("nccl-net-plugin", "pass"),
        ],
    },
    // AWS p6-b200: 8 EFA rails and two narrow ConnectX-7 functions, named and left out.
    Case {
        name: "aws-p6-b200",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("nic-narrow", "skip"),
            ("gpu-nic-near", "pass"),
            ("efa-address", "pass"),
            ("ib-lid-assigned", "pass"),
        ],
    },
    // An 8x H200 KVM guest, one QEMU root port per device: PHB in the guest, worded as a VM.
    Case {
        name: "kvm-h200x8-rootports",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-too-far", "fail"), ("gdr-path-dmabuf", "pass")],
    },
    // An 8x H200 KVM guest with an expander bridge per NUMA node and an emulated switch per
    // GPU/NIC pair: a VM laid out well passes, with no cabling finding.
    Case {
        name: "kvm-h200x8-pxb",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-near", "pass")],
    },
    // Issue 38: a GB200 tray, each GPU joined to its Grace by NVLink-C2C and reaching the
    // ConnectX-7s of that Grace over it (NCCL 2.27.3: GDR, mode Default); the BlueField-3s are
    // the front end.
    Case {
        name: "gb200-tray",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-nic-c2c", "pass"),
            ("acs-as-nvidia-requires", "pass"),
            ("grace-iommu-groups-as-required", "pass"),
            ("nic-ats-off", "pass"),
            ("iommu-smmu-translated", "pass"),
        ],
    },
    // NCCL 2.26.5 without NCCL_NET_GDR_C2C: no GDR over C2C; the fix sets it.
    Case {
        name: "gb200-nccl226",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-nic-c2c-no-gdr", "fail"),
            ("acs-as-nvidia-requires", "pass"),
        ],
    },
    // NCCL 2.27.3 with NCCL_NET_GDR_C2C=0 in /etc/nccl.conf: nccl-config names it.
    Case {
        name: "gb200-gdr-c2c-off",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-c2c-no-gdr", "fail"), ("nccl-gdr-c2c-off", "fail")],
    },
    // A GB300 tray: each GPU behind its ConnectX-8's switch beside the Data Direct DMA function.
    Case {
        name: "gb300-tray",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-nic-c2c", "pass"),
            ("acs-as-nvidia-requires", "pass"),
            ("grace-iommu-groups-as-required", "pass"),
            ("data-direct-found", "pass"),
        ],
    },
    Case {
        name: "gb300-acs-kernel-default",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("acs-not-as-nvidia-requires", "fail"),
            ("dma-gpu-iommu-groups-differ", "fail"),
            ("acs-as-nvidia-requires", "pass"),
        ],
    },
    // The GB200 tray with NVIDIA's proprietary module (issue 38): it cannot run Blackwell, and
    // the log holds its refusal of each GPU.
    Case {
        name: "gb200-proprietary",
        config: None,
        exit: 1,
        statuses: [
            "fail", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-needs-open-module", "fail"),
            ("kernel-log-gpu-needs-open-module", "fail"),
        ],
    },
    // The GB200 tray on Ubuntu's generic 6.8 arm64 kernel with iommu.passthrough=1 and the
    // kernel's ACS: no CUDA context before 6.11 without NVIDIA's patch (issue 38).
    Case {
        name: "gb200-smmu-passthrough",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "fail", "pass", "pass", "skip",
        ],
        codes: &[("iommu-smmu-passthrough-breaks-cuda", "fail")],
    },
];

fn run(case: &Case, format: &str) -> std::process::Output {
    let root = fixture(case.name);
    let config = case.config.map(|c| format!("fixtures/{}/{c}", case.name));
    let mut args = vec!["--root", root];
    if let Some(c) = &config {
        args.extend(["--config", c.as_str()]);
    }
    args.extend(["check", "--format", format]);
    gdrdoctor(&args)
}

#[test]
fn fixtures_give_their_verdicts() {
    let mut failures = Vec::new();
    for case in CASES {
        let out = run(case, "json");
        let c = code(&out);
        let report = json(&out);
        if c != case.exit {
            failures.push(format!("{}: exit {c}, expected {}", case.name, case.exit));
        }
        let got = statuses(&report);
        for (check, want) in CHECKS.iter().zip(case.statuses) {
            let have = got
                .iter()
                .find(|(id, _)| id == check)
                .map(|(_, s)| s.as_str())
                .unwrap_or("missing");
            if have != want {
                failures.push(format!("{}: {check} is {have}, expected {want}", case.name));
            }
        }
        let found = codes(&report);
        for (code, status) in case.codes {
            if !found.iter().any(|(c, s)| c == code && s == status) {
                failures.push(format!(
                    "{}: no {status} finding {code} (have {found:?})",
                    case.name
                ));
            }
        }
        assert_eq!(
            report["verdict"]["exit_code"].as_i64(),
            Some(i64::from(case.exit)),
            "{}",
            case.name
        );
        assert_eq!(report["root"]["live"], false);
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn reports_match_snapshots() {
    for case in CASES {
        let human = stdout(&run(case, "human"));
        insta::assert_snapshot!(format!("{}.human", case.name), human);
        let json = stdout(&run(case, "json"));
        insta::assert_snapshot!(format!("{}.json", case.name), json);
    }
}

/// The report at a glance (issue 15): a healthy 8-GPU, 8-NIC node is one line per check, and a
/// failing one shows its failure in full; `-v` keeps every finding with its evidence. Both
/// snapshotted for both.
#[test]
fn compact_and_verbose_reports() {
    for name in ["healthy-8gpu-roce", "acs-redirect-on-path"] {
        let root = fixture(name);
        let compact = stdout(&gdrdoctor(&["--root", root, "check"]));
        let verbose = stdout(&gdrdoctor(&["--root", root, "check", "-v"]));
        // Header, blank, a line per check (16), blank, verdict: the failing one adds its finding.
        if name == "healthy-8gpu-roce" {
            assert_eq!(compact.lines().count(), 21, "{compact}");
        }
        assert!(verbose.lines().count() > compact.lines().count());
        for line in compact.lines().filter(|l| l.starts_with("FAIL ")) {
            let id = line.split_whitespace().nth(1).unwrap();
            assert!(verbose.contains(&format!("FAIL    {id}")), "{id}");
        }
        insta::assert_snapshot!(format!("{name}.compact"), compact);
        insta::assert_snapshot!(format!("{name}.verbose"), verbose);
    }
}

/// Every fixture must be listed here or in the broken corpus (or the fleet's tests): an unlisted
/// fixture is one nobody checks.
#[test]
fn every_fixture_is_listed() {
    let mut unlisted = Vec::new();
    for name in fixture_names() {
        if name.starts_with("broken/") || name.starts_with("fleet/") {
            continue;
        }
        if !CASES.iter().any(|c| c.name == name) && !EXTRA.contains(&name.as_str()) {
            unlisted.push(name);
        }
    }
    assert!(
        unlisted.is_empty(),
        "fixtures not covered by a test: {unlisted:?}"
    );
}

/// Fixtures covered by other test files.
const EXTRA: &[&str] = &[];

/// Every finding names what it judged, and every warning or failure says how to fix it.
#[test]
fn findings_carry_evidence_and_fixes() {
    let mut failures = Vec::new();
    for case in CASES {
        let report = json(&run(case, "json"));
        for check in report["checks"].as_array().unwrap() {
            for f in check["findings"].as_array().unwrap() {
                let what = format!("{} {} {}", case.name, f["code"], f["subject"]);
                if f["evidence"].as_array().is_none_or(|e| e.is_empty()) {
                    failures.push(format!("{what}: no evidence"));
                }
                let status = f["status"].as_str().unwrap();
                if (status == "fail" || status == "warn") && f["fix"].is_null() {
                    failures.push(format!("{what}: {status} without a fix"));
                }
                if let Some(fix) = f.get("fix").filter(|x| !x.is_null()) {
                    if fix["commands"].as_array().is_none_or(|c| c.is_empty())
                        || fix["safety"].as_str().is_none_or(str::is_empty)
                    {
                        failures.push(format!("{what}: fix without commands or safety note"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// What to do with the node (issue 39, docs/actions.md): every warning and failure of every
/// fixture carries an action from the list, a pass or a skip none; in a VM no part is the
/// guest's to replace; and the action agrees with the fix's classes: `reboot` ends in a
/// disruptive command (or is a reboot the fix names), `fix-in-place` runs something on the
/// node (a runtime or persistent command, or a step for a person to do there).
#[test]
fn every_problem_says_what_to_do_with_the_node() {
    const ACTIONS: [&str; 6] = [
        "none",
        "fix-in-place",
        "reset-gpu",
        "reboot",
        "replace-part",
        "provider",
    ];
    let mut failures = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for case in CASES {
        let report = json(&run(case, "json"));
        let vm = report["checks"].as_array().unwrap().iter().any(|c| {
            c["findings"].as_array().unwrap().iter().any(|f| {
                f["evidence"].as_array().is_some_and(|e| {
                    e.iter().any(|e| {
                        e["value"]
                            .as_str()
                            .is_some_and(|v| v.contains("hypervisor"))
                    })
                })
            })
        });
        for check in report["checks"].as_array().unwrap() {
            for f in check["findings"].as_array().unwrap() {
                let what = format!("{} {} {}", case.name, f["code"], f["subject"]);
                let status = f["status"].as_str().unwrap();
                let action = f.get("action").and_then(|a| a.as_str());
                match (status, action) {
                    ("warn" | "fail", Some(a)) if ACTIONS.contains(&a) => {
                        seen.insert(a.to_owned());
                    }
                    ("warn" | "fail", _) => {
                        failures.push(format!("{what}: {status} with action {action:?}"))
                    }
                    ("pass" | "skip", Some(a)) => {
                        failures.push(format!("{what}: {status} with action {a}"))
                    }
                    _ => {}
                }
                if vm && action == Some("replace-part") {
                    failures.push(format!("{what}: replace-part in a VM"));
                }
                let classes: Vec<&str> = f["fix"]["commands"]
                    .as_array()
                    .map(|c| c.iter().filter_map(|c| c["class"].as_str()).collect())
                    .unwrap_or_default();
                let runs = |s: &str| {
                    f["fix"]["commands"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["run"].as_str().unwrap_or("").contains(s))
                    })
                };
                if !matches!(status, "warn" | "fail") {
                    continue;
                }
                match action {
                    Some("reboot")
                        if !classes.contains(&"disruptive")
                            && !runs("reboot")
                            && !f["fix"]["summary"]
                                .as_str()
                                .unwrap_or("")
                                .contains("reboot") =>
                    {
                        failures.push(format!(
                            "{what}: reboot, and the fix has no reboot {classes:?}"
                        ))
                    }
                    Some("fix-in-place") if classes.is_empty() => {
                        failures.push(format!("{what}: fix-in-place, and no fix"))
                    }
                    _ => {}
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    // The fixtures show most of the words.
    for a in ["fix-in-place", "reboot", "replace-part", "provider"] {
        assert!(seen.contains(a), "no fixture's finding asks {a}: {seen:?}");
    }
}

/// The Arm SMMU's rules (issue 38): translated passes (NVIDIA's mode on Grace); passthrough
/// fails on a kernel before 6.11 without NVIDIA's patch when ACS is on above a superchip GPU, and
/// the fix is iommu.passthrough=0 on the boot loader's command line; 6.11 and later, NVIDIA's
/// patched linux-nvidia 6.8, or ACS off, pass; ACS unreadable is unknown.
#[test]
fn arm64_smmu_rules_by_kernel_and_acs() {
    for name in ["arm64-iommu-translated", "gb200-tray", "gb300-tray"] {
        let case = CASES.iter().find(|c| c.name == name).unwrap();
        let report = json(&run(case, "json"));
        let f = &check(&report, "iommu")["findings"][0];
        assert_eq!(
            (f["code"].as_str(), f["status"].as_str()),
            (Some("iommu-smmu-translated"), Some("pass")),
            "{name}: {f}"
        );
        assert!(f["fix"].is_null(), "{name}: no passthrough advised: {f}");
    }
    let case = CASES
        .iter()
        .find(|c| c.name == "gb200-smmu-passthrough")
        .unwrap();
    let report = json(&run(case, "json"));
    let f = &check(&report, "iommu")["findings"][0];
    assert_eq!(f["code"], "iommu-smmu-passthrough-breaks-cuda", "{f}");
    assert_eq!(f["status"], "fail");
    let message = f["message"].as_str().unwrap();
    for said in [
        "6.8.0-60-generic-64k",
        "older than 6.11",
        "not NVIDIA's patched linux-nvidia 6.8",
        "ACS (ReqRedir, UpstreamFwd) is on above GPU 0008:01:00.0",
        "no CUDA context",
    ] {
        assert!(message.contains(said), "{said}: {message}");
    }
    let fix = f["fix"].to_string();
    assert!(fix.contains("iommu.passthrough=0"), "{fix}");
    assert!(fix.contains("update-grub"), "{fix}");
    assert!(
        fix.contains("--remove iommu.passthrough=1"),
        "the passthrough word taken out: {fix}"
    );
    let evidence = f["evidence"].to_string();
    assert!(
        evidence.contains("/proc/sys/kernel/osrelease"),
        "{evidence}"
    );
    assert!(
        evidence.contains("0x001d (SrcValid+ TransBlk- ReqRedir+"),
        "{evidence}"
    );

    // The same tray on other kernels, and with ACS as other nodes have it.
    let iommu = |node: &crate::common::NodeCopy| {
        let (_, r) = node.check(&[], &["--select", "iommu"]);
        let f = &check(&r, "iommu")["findings"][0];
        (
            f["code"].as_str().unwrap().to_owned(),
            f["status"].as_str().unwrap().to_owned(),
            f["message"].as_str().unwrap().to_owned(),
        )
    };
    let node = crate::common::NodeCopy::of("gb200-smmu-passthrough");
    for (release, why) in [
        ("6.11.0-1002-nvidia-64k", "6.11 or later"),
        ("6.14.0-1008-nvidia-64k", "6.11 or later"),
        (
            "6.8.0-1013-nvidia-64k",
            "NVIDIA's linux-nvidia 6.8 after 6.8.0-1010",
        ),
    ] {
        node.write("proc/sys/kernel/osrelease", format!("{release}\n"));
        let (code, status, message) = iommu(&node);
        assert_eq!(
            (code.as_str(), status.as_str()),
            ("iommu-passthrough", "pass"),
            "{message}"
        );
        assert!(message.contains(why), "{release}: {message}");
    }
    // NV-Kernels#22's own test kernel, before NVIDIA's patch.
    node.write("proc/sys/kernel/osrelease", "6.8.0-1010-nvidia-64k\n");
    assert_eq!(iommu(&node).1, "fail");
    // ACS cleared on GPU 0's root port: GPU 0 is fine, the other three still fail.
    let port = |dom: &str| format!("sys/devices/pci{dom}:00/{dom}:00:00.0/config");
    let original = |dom: &str| std::fs::read(node.root.join(port(dom))).unwrap();
    let acs_cleared = |dom: &str| {
        let mut config = original(dom);
        let control = acs_control(&config);
        config[control..control + 2].copy_from_slice(&[0, 0]);
        node.write(&port(dom), config);
    };
    acs_cleared("0008");
    let (_, status, message) = iommu(&node);
    assert_eq!(status, "fail");
    assert!(
        message.contains("above GPU 0009:01:00.0, 0018:01:00.0, 0019:01:00.0:"),
        "{message}"
    );
    // Config space as an unprivileged reader sees it (64 bytes): unknown, with the fix.
    for dom in ["0009", "0018", "0019"] {
        node.write(&port(dom), &original(dom)[..64]);
    }
    let (code, status, message) = iommu(&node);
    assert_eq!(
        (code.as_str(), status.as_str()),
        ("iommu-smmu-passthrough-breaks-cuda", "unknown"),
        "{message}"
    );
    // With ACS off above every GPU there is no PASID to bind: passthrough passes.
    let full = crate::common::NodeCopy::of("gb200-smmu-passthrough");
    for dom in ["0008", "0009", "0018", "0019"] {
        let mut config = std::fs::read(full.root.join(port(dom))).unwrap();
        let control = acs_control(&config);
        config[control..control + 2].copy_from_slice(&[0, 0]);
        full.write(&port(dom), config);
    }
    let (code, status, message) = iommu(&full);
    assert_eq!(
        (code.as_str(), status.as_str()),
        ("iommu-passthrough", "pass"),
        "{message}"
    );
    assert!(
        message.contains("ACS is off above every Grace superchip GPU"),
        "{message}"
    );
}

/// Where ACS Control is in a config space: the ACS extended capability (ID 0x000d), found by
/// walking the extended list from 0x100 (PCIe base spec 7.6), plus 6.
fn acs_control(config: &[u8]) -> usize {
    let mut at = 0x100;
    for _ in 0..64 {
        let h = u32::from_le_bytes(config[at..at + 4].try_into().unwrap());
        if h & 0xffff == 0x000d {
            return at + 6;
        }
        at = (h >> 20) as usize;
        assert!(at >= 0x100, "no ACS capability");
    }
    panic!("extended capability list loops");
}

#[test]
fn lab_guest_finds_rxe_through_its_netdev() {
    let case = CASES.iter().find(|c| c.name == "lab-switch-pt").unwrap();
    let report = json(&run(case, "json"));
    let rxe = &report["inventory"]["rdma_devices"][0];
    assert_eq!(
        (
            rxe["name"].as_str(),
            rxe["pci"].as_str(),
            rxe["driver"].as_str()
        ),
        (Some("rxe0"), Some("0000:03:00.0"), Some("rxe"))
    );
    let gid = &rxe["ports"][0]["gids"][1];
    assert_eq!(
        (
            gid["index"].as_u64(),
            gid["type"].as_str(),
            gid["ndev"].as_str()
        ),
        (Some(1), Some("RoCE v2"), Some("eth0"))
    );
    assert_eq!(
        report["inventory"]["gpus"][0]["model"],
        "virtio-gpu (lab stand-in)"
    );
    // Without the config, the lab guest has no GPU.
    let out = gdrdoctor(&[
        "--root",
        fixture("lab-switch-pt"),
        "check",
        "--format",
        "json",
    ]);
    assert_eq!(json(&out)["node"]["gpus"], 0);
}

/// Offline equals live on real-kernel data: the lab capture reports what gdrdoctor said live in
/// the guest just before capturing (reference/live.json), for every check that can run offline.
#[test]
fn lab_capture_reports_what_the_guest_saw_live() {
    let case = CASES.iter().find(|c| c.name == "lab-switch-pt").unwrap();
    let offline = json(&run(case, "json"));
    let live: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate_dir().join("fixtures/lab-switch-pt/reference/live.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(live["root"]["live"], true);
    let checks = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["id"] != "rdma-access" && c["id"] != "gdr-test")
            // The reference is older than nccl-config (issue 16): what it would have said
            // live is not recorded.
            .filter(|c| c["id"] != "nccl-config")
            // ... and older than link-health and kernel-log (issue 27).
            .filter(|c| c["id"] != "link-health" && c["id"] != "kernel-log")
            // ... and older than roce-lossless and the transport settings (issue 28).
            .filter(|c| c["id"] != "roce-lossless")
            // ... and older than job-history (issue 42).
            .filter(|c| c["id"] != "job-history")
            .map(|c| {
                // `summary` is derived from the findings and newer than this reference, and so
                // is each finding's `action` (issue 39).
                let mut c = c.clone();
                c.as_object_mut().unwrap().remove("summary");
                for f in c["findings"].as_array_mut().unwrap() {
                    f.as_object_mut().unwrap().remove("action");
                }
                c
            })
            .collect()
    };
    assert_eq!(checks(&offline), checks(&live));
    let inventory = |r: &serde_json::Value| {
        let mut i = r["inventory"].clone();
        i.as_object_mut().unwrap().remove("gdr_test");
        i
    };
    assert_eq!(inventory(&offline), inventory(&live));
    assert_eq!(offline["node"], live["node"]);
    // Live, the guest also passed rdma-access: uverbs0, memlock, libibverbs with the rxe provider.
    let access = live["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "rdma-access")
        .unwrap();
    assert_eq!(access["status"], "pass");
}

/// The same capture read twice gives the same report: no timestamps, no hash-map order.
#[test]
fn reports_are_deterministic() {
    let case = &CASES[1];
    assert_eq!(run(case, "json").stdout, run(case, "json").stdout);
}

/// Every field a JSON report can carry is documented in docs/report-json.md.
#[test]
fn json_fields_are_documented() {
    let mut reports: Vec<serde_json::Value> =
        CASES.iter().map(|case| json(&run(case, "json"))).collect();
    // Fields that only appear in some reports.
    let cfg = crate_dir().join("tests/data/override.yaml");
    reports.push(json(&gdrdoctor(&[
        "--config",
        cfg.to_str().unwrap(),
        "--root",
        fixture("h200x2-vm"),
        "check",
        "--format",
        "json",
    ])));
    reports.push(json(&gdrdoctor(&[
        "--root",
        fixture("h200x2-vm"),
        "check",
        "--format",
        "json",
        "--skip",
        "iommu",
    ])));
    let fields = Fields {
        // Status-keyed maps (counts) are documented as "status -> number".
        data_keys: &[("counts.checks", None), ("counts.findings", None)],
        short: &["checks[].findings[].", "checks[]."],
        ..Fields::default()
    };
    let fields = assert_json_documented("docs/report-json.md", &fields, &reports);
    assert!(
        fields.contains("checks[].findings[].original_status")
            && fields.contains("checks[].skipped")
    );
}

// -- the fixtures themselves ------------------------------------------------------------------

/// One member of a fixture's tree: its root-relative path, and what it is ('d'irectory, 'f'ile
/// with its bytes, 'l'ink with its target).
type Member = (String, char, Vec<u8>);

fn members_of_dir(root: &std::path::Path) -> Vec<Member> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<Member>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let t = std::fs::symlink_metadata(&p).unwrap().file_type();
            if t.is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                out.push((rel, 'l', target.as_os_str().as_encoded_bytes().to_vec()));
            } else if t.is_dir() {
                out.push((rel, 'd', Vec::new()));
                walk(root, &p, out);
            } else if rel != "FIXTURE.md" {
                // FIXTURE.md is compared whole with the committed copy instead.
                out.push((rel, 'f', std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

fn members_of_archive(file: &std::path::Path) -> Vec<Member> {
    use std::io::Read;
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(file).unwrap());
    let mut tar = tar::Archive::new(gz);
    let mut out = Vec::new();
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = String::from_utf8_lossy(&e.path_bytes())
            .trim_end_matches('/')
            .to_owned();
        let member = match e.header().entry_type() {
            tar::EntryType::Directory => (path, 'd', Vec::new()),
            tar::EntryType::Symlink => {
                let target = e.link_name_bytes().unwrap().into_owned();
                (path, 'l', target)
            }
            _ => {
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (path, 'f', data)
            }
        };
        out.push(member);
    }
    out
}

/// `0000:19:00.0` (or a host bridge's `pci0000:15`): where a device's own directory ends.
fn is_device_dir(c: &str) -> bool {
    let b = c.as_bytes();
    let bdf = b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, x)| [4, 7, 10].contains(&i) || x.is_ascii_hexdigit());
    bdf || (c.starts_with("pci") && c.len() == 10)
}

/// The line a member is counted in: a PCI function (and each RDMA device, netdev, DRM node under
/// it), else its first three path components (`sys/class/net`, `proc/driver/nvidia`).
fn group_of(path: &str) -> String {
    let c: Vec<&str> = path.split('/').collect();
    if c.len() > 3 && c[0] == "sys" && c[1] == "devices" && c[2].starts_with("pci") {
        let i = (2..c.len() - 1)
            .rev()
            .find(|&k| is_device_dir(c[k]))
            .unwrap_or(2);
        let sub = ["infiniband", "infiniband_verbs", "net", "drm"];
        let end = if c.len() > i + 3 && sub.contains(&c[i + 1]) {
            i + 3
        } else {
            i + 1
        };
        return c[..end].join("/");
    }
    c[..(c.len() - 1).clamp(1, 3)].join("/")
}

/// What a fixture holds, a line per group of members with their count and a hash of their
/// paths, kinds and bytes: a change to a node description (or to a committed capture) shows up
/// as a changed line in this snapshot's diff, and where.
fn tree_summary(mut members: Vec<Member>) -> String {
    members.sort();
    // A directory that holds something is implied by what it holds; only empty ones count.
    let parents: std::collections::BTreeSet<&str> = members
        .iter()
        .filter_map(|(p, _, _)| p.rsplit_once('/').map(|(dir, _)| dir))
        .collect();
    let parents: std::collections::BTreeSet<String> =
        parents.into_iter().map(str::to_owned).collect();
    members.retain(|(p, kind, _)| *kind != 'd' || !parents.contains(p));
    let mut groups: std::collections::BTreeMap<String, (usize, usize, u64)> = Default::default();
    let (mut files, mut links, mut dirs) = (0, 0, 0);
    for (path, kind, data) in &members {
        let g = groups
            .entry(group_of(path))
            .or_insert((0, 0, 0xcbf2_9ce4_8422_2325));
        match kind {
            'f' => (files += 1, g.0 += 1),
            'l' => (links += 1, g.1 += 1),
            _ => (dirs += 1, ()),
        };
        // FNV-1a over path, kind and content, each ended by a byte no path holds.
        for b in path
            .bytes()
            .chain([0, *kind as u8, 0])
            .chain(data.iter().copied())
            .chain([0xff])
        {
            g.2 ^= u64::from(b);
            g.2 = g.2.wrapping_mul(0x100_0000_01b3);
        }
    }
    let mut out = format!("{files} files, {links} links, {dirs} empty directories\n");
    for (group, (f, l, h)) in groups {
        out += &format!("{h:016x} {f:>4} {l:>3}  {group}\n");
    }
    out
}

/// Every fixture's tree, summarised: the generated ones (as synth.py wrote them this run), the
/// fleet's archives and the committed capture archives.
#[test]
fn fixture_trees_match_snapshots() {
    // One snapshot for every tree, a section each: a file per fixture would take a tenth of the
    // repository's files (the brief keeps it under 1,000).
    let header =
        "hash             files links  group (a PCI function, or the first 3 path components)\n";
    let mut all = String::new();
    for name in fixture_names() {
        let path = fixture_path(&name);
        let members = if path.is_dir() {
            members_of_dir(&path)
        } else {
            members_of_archive(&path)
        };
        assert!(members.len() > 1, "{name}: empty");
        all.push_str(&format!("## {name}\n{header}{}\n", tree_summary(members)));
    }
    insta::assert_snapshot!("trees", all);
}

/// The committed folder of every fixture holds its FIXTURE.md, equal to the one the generator
/// writes beside the tree (`python3 fixtures/synth/synth.py --docs fixtures` rewrites them), and
/// no tree: the synthetic trees are generated, the real captures are one archive each.
#[test]
fn committed_fixture_folders_hold_docs_not_trees() {
    let committed = crate_dir().join("fixtures");
    let mut failures = Vec::new();
    let mut folders: Vec<String> = fixture_names()
        .into_iter()
        .filter(|n| !n.starts_with("fleet/"))
        .collect();
    folders.push("fleet".into());
    for name in &folders {
        let dir = committed.join(name);
        let doc = std::fs::read(dir.join("FIXTURE.md")).unwrap_or_default();
        if doc.is_empty() {
            failures.push(format!("fixtures/{name}: no FIXTURE.md"));
        }
        let mut entries: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        entries.sort();
        if CAPTURES.contains(&name.as_str()) {
            if !dir.join("capture.tar.gz").is_file() || dir.join("sys").exists() {
                failures.push(format!(
                    "fixtures/{name}: not one capture.tar.gz: {entries:?}"
                ));
            }
            continue;
        }
        let generated = std::fs::read(home().join("fixtures").join(name).join("FIXTURE.md"))
            .unwrap_or_default();
        if doc != generated {
            failures.push(format!(
                "fixtures/{name}/FIXTURE.md differs from the generator's \
                 (python3 fixtures/synth/synth.py --docs fixtures)"
            ));
        }
        if entries != ["FIXTURE.md"] {
            failures.push(format!(
                "fixtures/{name}: holds {entries:?}; a generated fixture commits its FIXTURE.md only"
            ));
        }
    }
    // And nothing else: every committed folder is a fixture's (or pciutils' dumps, NCCL's logs
    // for `nccl explain`, the public topology files the VM fixtures and the parser read, or the
    // generator).
    for e in std::fs::read_dir(&committed).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let known = folders.contains(&name)
            || ["broken", "pciutils", "synth", "nccl-logs", "nccl-topo"].contains(&name.as_str())
            || name.ends_with(".md")
            || name.ends_with(".sh");
        if !known {
            failures.push(format!(
                "fixtures/{name}: not a fixture anything generates or reads"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
