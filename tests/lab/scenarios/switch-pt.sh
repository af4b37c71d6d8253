# NIC (e1000e + Soft-RoCE) and accelerator (virtio-gpu) on two downstream ports of one PCIe
# switch, IOMMU in passthrough, rxe0 up with a RoCE v2 IPv4 GID, jumbo MTU. The healthy lab node.
TOPO=switch
IOMMU=pt
guest() {
    rxe_node
}
EXPECT='
exit 0
check gpu-driver pass
check iommu pass
check rdma-link pass
check rdma-gid pass
check rdma-access pass
check pcie-placement pass
message gpu-nic-near nearest NIC: rxe0 at PIX
check acs pass
code acs-absent pass
check pcie-link pass
code iommu-passthrough pass
code rdma-port-active pass
code roce-v2-ipv4 pass
code uverbs-ok pass
code memlock-ok pass
code libibverbs-ok pass
gid-index-matches-kernel
nocode peermem-not-registered
json node.gpus 1
json inventory.rdma_devices[name=rxe0].pci 0000:03:00.0
json inventory.rdma_devices[name=rxe0].driver rxe
# The real kernel answers dcbnl for e1000e with EOPNOTSUPP: the lossless chain is unknown,
# never a pass (issue 28); the capture replays it (checked with every scenario).
check roce-lossless unknown
code roce-qos-unknown unknown
message roce-qos-unknown eth0'"'"'s driver has no DCB interface
# What the kernel answered, as the capture keeps it: dcbnl EOPNOTSUPP (95), and e1000e'"'"'s real
# ethtool answers: its pause parameters (802.3x autonegotiated, both ways: e1000e'"'"'s default)
# and its flow-control statistics (the kept ones).
file-json qos.json netdevs.eth0.dcb.error.kind not-supported
file-json qos.json netdevs.eth0.dcb.error.errno 95
file-json qos.json netdevs.eth0.ethtool.pause.ok {"autoneg": true, "rx": true, "tx": true}
file-has qos.json netdevs.eth0.ethtool.stats.ok[0]
file-contains qos.json rx_flow_control_xon
code kernel-log-clean pass
'
