# A warning's fix runs only when asked (issue 39): on a RoCE port whose netdev MTU is 1500, a
# plain `fix --apply` changes nothing; `--warnings` sets the MTU (ip link, behind its test) and
# the check after it has the warning gone.
TOPO=switch
IOMMU=pt
guest() {
    rxe_node
    ip link set dev eth0 mtu 1500
    sleep 3
    gdrdoctor fix --apply --yes > /tmp/apply.txt 2>&1
    echo "rc $?" >> /tmp/apply.txt
    gdrdoctor fix --apply --warnings --yes > /tmp/apply-warnings.txt 2>&1
    echo "rc $?" >> /tmp/apply-warnings.txt
    cat /sys/class/net/eth0/mtu > /tmp/mtu.txt
    sleep 2
    for f in apply.txt apply-warnings.txt mtu.txt; do send "$f" "/tmp/$f"; done
}
EXPECT='
file-contains apply.txt nothing to apply: no runtime fix for a failure
file-contains apply-warnings.txt $ ip link set dev eth0 mtu 9000
file-contains apply-warnings.txt rc 0
file-contains apply-warnings.txt rdma-link: warn -> pass
check rdma-link pass
file-contains mtu.txt 9000
'
