# The RDMA modules are loaded but no RDMA device exists: the RDMA checks say so plainly.
TOPO=switch
IOMMU=pt
guest() {
    modules
    net_up eth0 9000
}
EXPECT='
exit 1
check rdma-link fail
code rdma-no-device fail
message rdma-no-device no RDMA device
check rdma-gid skip
json node.rdma_devices 0
'
