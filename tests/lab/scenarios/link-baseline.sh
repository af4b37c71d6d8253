# A link flap between two periodic runs (`check --baseline FILE`, what the metrics timer runs):
# each run reads rxe0's port ACTIVE; the second judges what grew since the first (link_downed,
# carrier_changes) and fails on the flap, naming the span; a third run, with nothing since,
# is quiet. The first run has no baseline and says so.
TOPO=switch
IOMMU=pt
guest() {
    rxe_node
    ulimit -l unlimited
    gdrdoctor check --baseline /tmp/baseline.tar.gz --format json > /tmp/first.json 2> /tmp/first.err
    echo $? > /tmp/first.rc
    $IP link set dev eth0 down
    wait_for 60 port_not_active || log "rxe0 port 1 still ACTIVE 60 s after eth0 went down"
    $IP link set dev eth0 up
    # rxe's port reads ACTIVE before the e1000e carrier is back (about 2 s): wait for both.
    wait_for 60 carrier_is eth0 1 || log "eth0: no carrier 60 s after the flap"
    wait_for 60 port_active || log "rxe0 port 1 not ACTIVE again 60 s after the flap"
    wait_for 60 has_roce_v2_gid || log "rxe0: no RoCE v2 GID again after the flap"
    gdrdoctor check --baseline /tmp/baseline.tar.gz --format json > /tmp/second.json 2> /tmp/second.err
    echo $? > /tmp/second.rc
    gdrdoctor check --baseline /tmp/baseline.tar.gz --format json > /tmp/third.json 2> /tmp/third.err
    echo $? > /tmp/third.rc
    for f in first.json first.rc first.err second.json second.rc second.err third.json third.rc; do
        send "$f" "/tmp/$f"
    done
}
EXPECT='
exit 0
file-contains first.err no baseline yet (the first run writes it)
rc first.rc 0
file-code first.json link-clean pass
file-finding second.json link-flapping rxe0 port 1 | since the last run (/tmp/baseline.tar.gz)
file-finding second.json link-flapping rxe0 port 1 | link_downed +
file-finding second.json link-flapping rxe0 port 1 | carrier_changes +2
rc second.rc 1
file-code third.json link-quiet pass
rc third.rc 0
'
