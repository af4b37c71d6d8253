# A link flap inside the sample window: rxe0's netdev goes down and up while `check --sample`
# waits, and link-health fails on the flap (carrier_changes, rxe's link_downed). The report
# after it, one reading, shows the flap as history and judges nothing.
TOPO=switch
IOMMU=pt
guest() {
    rxe_node
    ulimit -l unlimited
    # The first reading is taken within the first seconds (under TCG); the flap comes after it
    # and is over (carrier back, port ACTIVE) well before the second reading.
    ( sleep 5; $IP link set dev eth0 down; sleep 1; $IP link set dev eth0 up ) &
    flapper=$!
    gdrdoctor check --sample 20 --format json > /tmp/flap.json 2> /tmp/flap.err
    echo $? > /tmp/flap.rc
    wait $flapper
    wait_for 60 port_active || log "rxe0 port 1 not ACTIVE again 60 s after the flap"
    wait_for 60 has_roce_v2_gid || log "rxe0: no RoCE v2 GID again after the flap"
    for f in flap.json flap.rc flap.err; do send "$f" "/tmp/$f"; done
}
EXPECT='
exit 0
check rdma-link pass
rc flap.rc 1
file-code flap.json link-flapping fail
file-message flap.json link-flapping carrier_changes
file-json flap.json verdict.exit_code 1
code link-history skip
'
