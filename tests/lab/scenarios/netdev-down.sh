# rxe0 on eth0, then eth0 taken down: the port is not ACTIVE.
TOPO=switch
IOMMU=pt
guest() {
    modules
    net_up eth0 9000
    rxe_add eth0
    $IP link set dev eth0 down
    sleep 0.5
    log "after eth0 down: $(cat /sys/class/infiniband/rxe0/ports/1/state)"
}
EXPECT='
exit 1
check rdma-link fail
code rdma-port-down fail
fix rdma-port-down ip link set dev eth0 up
'
