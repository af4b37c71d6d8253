# Packet loss inside the sample window: rxe0 (eth0) writes into rxe1 (eth1) over the two NICs
# wired together, netem drops 5% of what eth0 sends; link-health warns on the retries.
TOPO=switch
IOMMU=pt
NIC_LINK=1
# The RDMA counters, and the netdev counters link-health reads with the others.
counters() {
    rxe_counters rxe0 rxe1
    for i in eth0 eth1; do
        for c in carrier_changes statistics/rx_errors statistics/rx_crc_errors statistics/tx_errors \
                 statistics/rx_packets statistics/tx_packets; do
            echo "$i ${c#statistics/} $(cat "/sys/class/net/$i/$c")"
        done
    done
}
guest() {
    modules
    modprobe sch_netem || log "modprobe sch_netem failed"
    rxe_wire
    ulimit -l unlimited
    g0=$(gid_index rxe0 "$ADDR") g1=$(gid_index rxe1 "$ADDR1")
    counters > /tmp/counters-before.txt 2>&1
    $TC qdisc add dev eth0 root netem loss 5% || log "tc qdisc add netem failed"
    # The window opens (first reading taken), then the writes start: every retry they cause is
    # counted whether they end before the second reading or after it.
    GDRDOCTOR_TRACE=1 gdrdoctor check --sample 15 --format json > /tmp/loss.json 2> /tmp/loss.err &
    check=$!
    wait_for 60 window_open /tmp/loss.err || log "no sample window after 60 s"
    log "window open; ib_write_bw rxe0 -> rxe1, 4 KiB x 2000, netem loss 5% on eth0"
    read -r t0 _ < /proc/uptime
    timeout 120 ib_write_bw -d rxe1 -x "$g1" -F -s 4096 -n 2000 --report_gbits > /tmp/perftest-server.txt 2>&1 &
    server=$!
    # The client connects once: start it when the server listens (TCP 18515 = 0x4853).
    wait_for 60 grep -qs ':4853 [0-9A-F]*:[0-9A-F]* 0A' /proc/net/tcp /proc/net/tcp6 ||
        log "ib_write_bw server not listening after 60 s"
    timeout 120 ib_write_bw -d rxe0 -x "$g0" -F -s 4096 -n 2000 --report_gbits 127.0.0.1 > /tmp/perftest.txt 2>&1
    echo $? > /tmp/perftest.rc
    wait $server
    read -r t1 _ < /proc/uptime
    echo "$t0 $t1" | awk '{ print $2 - $1 }' > /tmp/perftest.seconds
    log "ib_write_bw exit $(cat /tmp/perftest.rc) after $(cat /tmp/perftest.seconds) s"
    wait $check
    echo $? > /tmp/loss.rc
    log "check --sample 15: exit $(cat /tmp/loss.rc)"
    $TC -s qdisc show dev eth0 > /tmp/netem.txt 2>&1
    $TC qdisc del dev eth0 root
    counters > /tmp/counters-after.txt 2>&1
    dmesg > /tmp/dmesg.txt
    for f in loss.json loss.rc loss.err perftest.txt perftest.rc perftest.seconds perftest-server.txt \
             netem.txt counters-before.txt counters-after.txt dmesg.txt; do
        send "$f" "/tmp/$f"
    done
}
EXPECT='
rc perftest.rc 0
file-contains netem.txt loss 5%
file-code loss.json link-retries-growing warn
file-finding loss.json link-retries-growing rxe0 port 1 | rcvd_seq_err +
file-finding loss.json link-retries-growing rxe0 port 1 | completer_retry_err +
file-finding loss.json link-retries-growing rxe1 port 1 | out_of_seq_request +
file-nocode loss.json link-errors-growing
file-json loss.json verdict.exit_code 0
rc loss.rc 0
code link-history skip
'
