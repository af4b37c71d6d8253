# `gdrdoctor fix --apply --yes` on a port whose netdev is down (issue 39): it runs `ip link set
# dev eth0 up` behind its test of IFF_UP, checks again and shows rdma-link going from fail to
# pass; a second apply has nothing to do; the report that follows has rdma-link passing.
TOPO=switch
IOMMU=pt
guest() {
    rxe_node
    netdev_down eth0
    gdrdoctor fix --apply --yes > /tmp/apply.txt 2>&1
    echo "rc $?" >> /tmp/apply.txt
    sleep 2
    gdrdoctor fix --apply --yes > /tmp/apply-again.txt 2>&1
    for f in apply.txt apply-again.txt; do send "$f" "/tmp/$f"; done
}
EXPECT='
check rdma-link pass
file-contains apply.txt [rdma-link/rdma-port-down] $ ip link set dev eth0 up
file-contains apply.txt rdma-link: fail -> pass
file-contains apply.txt rc 0
file-contains apply-again.txt nothing to apply: no runtime fix for a failure
'
