# The GDR write test through a port that is down (rxe0's netdev taken down): it fails fast,
# naming the port, instead of waiting for a completion that never comes.
TOPO=switch
IOMMU=pt
guest() {
    modules
    net_up eth0 9000
    rxe_add eth0
    ulimit -l unlimited
    $IP link set dev eth0 down
    sleep 1
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
below gdr-down.seconds 2
'
