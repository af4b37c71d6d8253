# The GDR write test through a port that is down (rxe0's netdev taken down): it fails fast,
# naming the port, instead of waiting for a completion that never comes.
TOPO=switch
IOMMU=pt
guest() {
    rxe_node
    ulimit -l unlimited
    netdev_down eth0
    read -r t0 _ < /proc/uptime
    gdrdoctor gdr-test --memory host --nic rxe0 --format json > /tmp/gdr-down.json 2>&1
    echo $? > /tmp/gdr-down.rc
    read -r t1 _ < /proc/uptime
    echo "$t0 $t1" | awk '{ print $2 - $1 }' > /tmp/gdr-down.seconds
    for f in gdr-down.json gdr-down.rc gdr-down.seconds; do send "$f" "/tmp/$f"; done
}
EXPECT='
exit 1
check rdma-link fail
file-code gdr-down.json gdr-test-port-down fail
file-message gdr-down.json gdr-test-port-down rxe0 port 1 is DOWN
file-json gdr-down.json verdict.exit_code 1
# Fast: the port state is read before any WRITE is posted (0.5 s seen under TCG, from the start
# of the process). The bound is half the 10 s pair deadline (timeouts.gdr_pair_s): a run that
# waited for a completion fails it, a run slowed by a loaded host does not.
below gdr-down.seconds 5
'
