# rxe0 on eth0, then eth0 taken down: the port is not ACTIVE.
TOPO=switch
IOMMU=pt
guest() {
    rxe_node
    netdev_down eth0
}
EXPECT='
exit 1
check rdma-link fail
code rdma-port-down fail
fix rdma-port-down ip link set dev eth0 up
'
