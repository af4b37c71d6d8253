# Guest-side helpers for the lab scenarios: sourced by /guest.sh inside the VM (busybox sh).
# A scenario's guest part calls these to set the node up, then `report` runs gdrdoctor and sends
# the results back over the second serial port (ttyS1) as base64 blocks the host decodes.

# Debian's busybox sh runs its own applets (ip, modprobe, ...) before PATH: call iproute2's ip
# by its full path.
IP=/usr/sbin/ip
ADDR=192.0.2.1 # TEST-NET-1 (RFC 5737): the NIC's hub port leads nowhere, nothing leaves the VM

log() { read -r up _ < /proc/uptime; echo "[t=$up] $*"; }

modules() {
    for m in e1000e virtio_pci virtio_gpu crc32_generic rdma_rxe ib_uverbs rdma_ucm; do
        modprobe "$m" || log "modprobe $m failed"
    done
}

# wait_for SECONDS COMMAND...: poll (every 0.1 s) until COMMAND succeeds; fails after SECONDS.
# Every wait on the kernel polls for the state it needs, never sleeps a fixed time: under TCG on
# a loaded host a step that takes 0.5 s alone can take several. The limits are generous, since
# they only bound a guest whose kernel never gets there.
wait_for() {
    n=$(($1 * 10))
    shift
    while ! "$@"; do
        n=$((n - 1))
        [ $n -gt 0 ] || return 1
        sleep 0.1
    done
}
carrier_is() { [ "$(cat "/sys/class/net/$1/carrier" 2>/dev/null)" = "$2" ]; }
port_active() { [ "$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)" = "4: ACTIVE" ]; }
port_not_active() { ! port_active; }
has_roce_v2_gid() { [ "$(kernel_gid_index)" != none ]; }

# net_up IFACE [MTU]: bring IFACE up with the lab address and wait for the carrier (~1.8 s).
net_up() {
    echo 0 > "/proc/sys/net/ipv6/conf/$1/accept_dad" # skip ~2 s of IPv6 duplicate detection
    [ -n "${2:-}" ] && $IP link set dev "$1" mtu "$2"
    $IP link set dev "$1" up
    $IP addr add "$ADDR/24" dev "$1"
    wait_for 60 carrier_is "$1" 1 || log "$1: no carrier after 60 s"
    log "$1 up, mtu $(cat "/sys/class/net/$1/mtu"), carrier $(cat "/sys/class/net/$1/carrier")"
}

# rxe_add IFACE: Soft-RoCE device rxe0 on IFACE; waits for the port and the RoCE v2 GID of the
# lab address, which lands just after the port turns ACTIVE.
rxe_add() {
    rdma link add rxe0 type rxe netdev "$1" || log "rdma link add failed"
    p=/sys/class/infiniband/rxe0/ports/1
    wait_for 60 port_active || log "rxe0 port 1 not ACTIVE after 60 s"
    wait_for 60 has_roce_v2_gid || log "rxe0: no RoCE v2 GID for $ADDR after 60 s"
    log "rxe0 port 1: $(cat $p/state) / $(cat $p/phys_state), RoCE v2 GID index $(kernel_gid_index)"
}

# rxe_node: the lab node most scenarios start from: its modules, eth0 up with jumbo frames, and
# rxe0 on it.
rxe_node() {
    modules
    net_up eth0 9000
    rxe_add eth0
}

# netdev_down IFACE: take IFACE down and wait until rxe0's port has seen it.
netdev_down() {
    $IP link set dev "$1" down
    wait_for 60 port_not_active || log "rxe0 port 1 still ACTIVE 60 s after $1 went down"
    log "after $1 down: $(cat /sys/class/infiniband/rxe0/ports/1/state)"
}

# The GID of an IPv4 address as sysfs shows it: 192.0.2.1 is
# 0000:0000:0000:0000:0000:ffff:c000:0201.
ipv4_gid() {
    echo "$1" | awk -F. '{ printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n", $1, $2, $3, $4 }'
}

# The index the kernel gave the RoCE v2 GID of $ADDR (192.0.2.1: ::ffff:c000:0201), or "none".
kernel_gid_index() { gid_index rxe0 "$ADDR"; }

# gid_index DEV IPV4: the index of the RoCE v2 GID of IPV4 on DEV's port 1, or "none".
gid_index() {
    p=/sys/class/infiniband/$1/ports/1
    [ -d $p ] || { echo none; return; }
    # One grep over every slot: a fork per slot costs seconds under TCG.
    grep -l "^$(ipv4_gid "$2")\$" $p/gids/* 2>/dev/null | while read -r f; do
        i=${f##*/}
        [ "$(cat $p/gid_attrs/types/"$i")" = "RoCE v2" ] && echo "$i"
    done | sort -n | head -n 1 | grep . || echo none
}

# comparator_write_bw GID: ib_write_bw over rxe0 (server and client in this guest, 1 MiB
# messages), the comparator for the write test's bandwidth. perftest samples a -D run between a
# warm-up and a cool-down of duration/4 whole seconds each: -D 2 has none and, under TCG, often
# completed no iteration ("0.0 Gb/s"), so the first run is -D 4 (1 s warm-up, 2 s sampled). A run
# that still completes no iteration or exits non-zero (a loaded host) says nothing about
# gdrdoctor: it is repeated longer (-D 8, then -D 16). Leaves the last attempt's client and server
# output in /tmp/perftest.txt and /tmp/perftest-server.txt, and /tmp/perftest-attempts.txt: one
# line per attempt, then "comparator ok" or "comparator failed" (expect.py's perftest-ratio then
# records the failure and does not judge the ratio).
comparator_write_bw() {
    : > /tmp/perftest-attempts.txt
    for d in 4 8 16; do
        log "ib_write_bw over rxe0 (GID $1), 1 MiB messages, $d s"
        timeout $((d + 60)) ib_write_bw -d rxe0 -x "$1" -s 1048576 -D "$d" -F --report_gbits > /tmp/perftest-server.txt 2>&1 &
        server=$!
        # The client connects once: start it when the server listens (TCP 18515 = 0x4853).
        wait_for 60 grep -qs ':4853 [0-9A-F]*:[0-9A-F]* 0A' /proc/net/tcp /proc/net/tcp6 ||
            log "ib_write_bw server not listening after 60 s"
        timeout $((d + 60)) ib_write_bw -d rxe0 -x "$1" -s 1048576 -D "$d" -F --report_gbits "$ADDR" > /tmp/perftest.txt 2>&1
        rc=$?
        [ $rc = 0 ] || kill $server 2>/dev/null
        wait $server
        # The result row: #bytes #iterations BW-peak BW-average MsgRate.
        iters=$(awk '$1 ~ /^[0-9]+$/ && NF >= 4 { n = $2 } END { print n + 0 }' /tmp/perftest.txt)
        echo "attempt -D $d: exit $rc, $iters iterations" >> /tmp/perftest-attempts.txt
        if [ $rc = 0 ] && [ "$iters" -gt 0 ]; then
            echo "comparator ok" >> /tmp/perftest-attempts.txt
            return 0
        fi
    done
    echo "comparator failed" >> /tmp/perftest-attempts.txt
    return 1
}

# ------------------------------------------------------------------- fault scenarios --
# Packet loss (netem) between two rxe devices, and PCIe AER errors injected in the guest
# (aer_inject) or by QEMU (HMP=1, `LAB_HMP <command>`). Busybox's tc applet lacks netem.
TC=/usr/sbin/tc
ADDR1=192.0.2.2 # eth1's address when the two NICs are wired together (NIC_LINK=1)

dev_active() { [ "$(cat "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null)" = "4: ACTIVE" ]; }
has_gid() { [ "$(gid_index "$1" "$2")" != none ]; }

# net_on IFACE IPV4: IFACE up with IPV4/24 at its default MTU; waits for the carrier.
net_on() {
    echo 0 > "/proc/sys/net/ipv6/conf/$1/accept_dad"
    $IP link set dev "$1" up
    $IP addr add "$2/24" dev "$1"
    wait_for 60 carrier_is "$1" 1 || log "$1: no carrier after 60 s"
}

# rxe_on DEV IFACE IPV4: Soft-RoCE device DEV on IFACE; waits for its port and IPV4's RoCE v2 GID.
rxe_on() {
    rdma link add "$1" type rxe netdev "$2" || log "rdma link add $1 failed"
    wait_for 60 dev_active "$1" || log "$1 port 1 not ACTIVE after 60 s"
    wait_for 60 has_gid "$1" "$3" || log "$1: no RoCE v2 GID for $3 after 60 s"
    log "$1 on $2 ($3): $(cat "/sys/class/infiniband/$1/ports/1/state"), RoCE v2 GID index $(gid_index "$1" "$3")"
}

# rxe_wire: eth0 and eth1, on one QEMU hub (NIC_LINK=1), as the two ends of a wire: rxe0 on
# eth0 ($ADDR), rxe1 on eth1 ($ADDR1). Both addresses are this node's own, so the kernel would
# deliver between them through loopback (which rxe also short-cuts, past any qdisc): each is
# routed out of the other's NIC instead, and what arrives on a NIC is delivered locally.
rxe_wire() {
    net_on eth0 "$ADDR"
    net_on eth1 "$ADDR1"
    for i in all eth0 eth1; do
        echo 1 > "/proc/sys/net/ipv4/conf/$i/accept_local"
        echo 0 > "/proc/sys/net/ipv4/conf/$i/rp_filter"
    done
    $IP rule add pref 10 iif eth0 lookup local
    $IP rule add pref 11 iif eth1 lookup local
    $IP route add "$ADDR1" dev eth0 src "$ADDR" table 100
    $IP route add "$ADDR" dev eth1 src "$ADDR1" table 101
    $IP rule add pref 20 to "$ADDR1" lookup 100
    $IP rule add pref 21 to "$ADDR" lookup 101
    $IP rule add pref 1000 lookup local
    $IP rule del pref 0
    # No ARP on the wire: QEMU's e1000e counts a received frame shorter than 60 bytes as
    # undersized (rx_length_errors, part of rx_errors) and the sending one does not pad it, so
    # each 42-byte ARP request and reply between the two NICs is a receive error on the other.
    $IP neigh replace "$ADDR1" lladdr "$(cat /sys/class/net/eth1/address)" dev eth0 nud permanent
    $IP neigh replace "$ADDR" lladdr "$(cat /sys/class/net/eth0/address)" dev eth1 nud permanent
    log "route to $ADDR1: $($IP route get "$ADDR1" from "$ADDR" | head -n 1)"
    rxe_on rxe0 eth0 "$ADDR"
    rxe_on rxe1 eth1 "$ADDR1"
}

# rxe_counters DEV...: each device's hw_counters (sysfs) and `rdma statistic show`.
rxe_counters() {
    for d in "$@"; do
        echo "# /sys/class/infiniband/$d/ports/1/hw_counters"
        for c in "/sys/class/infiniband/$d/ports/1/hw_counters"/*; do
            echo "$d ${c##*/} $(cat "$c")"
        done
        echo "# rdma statistic show link $d/1"
        rdma statistic show link "$d/1"
    done
}

# window_open ERR_FILE: the `check --sample` run whose stderr is ERR_FILE (GDRDOCTOR_TRACE=1)
# has taken its first reading and waits for the second: faults from now on fall in the window.
window_open() { grep -qs 'reading the link counters again' "$1"; }

# aer_total BDF FILE: the TOTAL_ERR_ line of a function's aer_dev_* file.
aer_total() { awk '/^TOTAL_ERR_/ { print $2 }' "/sys/bus/pci/devices/$1/$2"; }
aer_changed() { [ "$(aer_total "$1" "$2")" != "$3" ]; }

le32() { # N: four octal escapes for printf, little endian
    printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255))
}
# aer_inject BDF FILE UNCOR COR: one error through the kernel's aer_inject (a 32-byte struct
# aer_error_inj written to /dev/aer_inject: bus, dev, fn, pad; uncor_status, cor_status,
# header_log0-3, domain as little-endian u32), then wait until FILE (aer_dev_correctable,
# aer_dev_nonfatal) of the function counts it. BDF is 0000:BB:DD.F.
aer_inject() {
    bus=$(echo "$1" | cut -d: -f2) devfn=$(echo "$1" | cut -d: -f3)
    before=$(aer_total "$1" "$2")
    read -r t0 _ < /proc/uptime
    printf "$(printf '\\%03o\\%03o\\%03o\\000' $((0x$bus)) $((0x${devfn%.*})) "${devfn#*.}")$(le32 "$3")$(le32 "$4")$(le32 0)$(le32 0)$(le32 0)$(le32 0)$(le32 0)" > /tmp/aer-inj
    dd if=/tmp/aer-inj of=/dev/aer_inject bs=32 count=1 2>/dev/null || log "aer_inject $1 failed"
    wait_for 30 aer_changed "$1" "$2" "$before" || log "$1 $2 still $before 30 s after aer_inject"
    read -r t1 _ < /proc/uptime
    log "aer_inject $1 uncor $3 cor $4: $2 total $before -> $(aer_total "$1" "$2") after $(echo "$t0 $t1" | awk '{ print $2 - $1 }') s"
}

# hmp_inject BDF FILE COMMAND...: ask the host to send COMMAND to QEMU's monitor (HMP=1), then
# wait until FILE of the function counts the error.
hmp_inject() {
    bdf=$1 file=$2
    shift 2
    before=$(aer_total "$bdf" "$file")
    read -r t0 _ < /proc/uptime
    echo "LAB_HMP $*"
    wait_for 60 aer_changed "$bdf" "$file" "$before" || log "$bdf $file still $before 60 s after HMP $*"
    read -r t1 _ < /proc/uptime
    log "HMP $* (asked at $t0): $bdf $file total $before -> $(aer_total "$bdf" "$file") after $(echo "$t0 $t1" | awk '{ print $2 - $1 }') s"
}

# send NAME FILE: one file back to the host.
send() {
    echo "=== LAB-FILE $1"
    base64 "$2"
    echo "=== LAB-END $1"
}

# report: run gdrdoctor live, capture, run it on the capture; send everything back.
report() {
    ulimit -l unlimited # what jobs get from a site that follows the rdma-access advice
    kernel_gid_index > /tmp/kernel-gid-index
    log "gdrdoctor check (live)"
    gdrdoctor check --format json > /tmp/live.json 2> /tmp/live.err
    echo $? > /tmp/live.rc
    gdrdoctor check -v --color never > /tmp/live.txt 2>&1
    log "gdrdoctor capture"
    gdrdoctor capture /tmp/cap > /tmp/capture.log 2>&1
    gdrdoctor capture /tmp/cap.tar.gz >> /tmp/capture.log 2>&1
    log "gdrdoctor check (on the capture)"
    gdrdoctor --root /tmp/cap check --format json > /tmp/offline.json 2> /tmp/offline.err
    echo $? > /tmp/offline.rc
    for f in live.json live.rc live.err live.txt offline.json offline.rc offline.err capture.log kernel-gid-index; do
        send "$f" "/tmp/$f"
    done
    send cap.tar.gz /tmp/cap.tar.gz
    # What the kernel answered to dcbnl and ethtool, as the capture keeps it (docs/qos-json.md).
    if [ -f /tmp/cap/gdrdoctor/qos.json ]; then send qos.json /tmp/cap/gdrdoctor/qos.json; fi
    log "reported"
}

# ----------------------------------------------------------------- two-node scenarios --
# NODES=2 (lab.sh run_pair): this guest is node a or node b. eth0 is the rail (rxe0 on it,
# RAIL_A/RAIL_B), eth1 the management network (MGMT_A/MGMT_B) that carries the control
# connection and perftest's exchange, as on a cluster. Documentation ranges are not used here:
# the two guests' networks are their own (QEMU socket netdevs), nothing else is on them.
NODE=$(cat /etc/lab-node 2>/dev/null || echo a)
MGMT_A=10.8.0.1 MGMT_B=10.8.0.2
RAIL_A=10.9.0.1 RAIL_B=10.9.0.2
if [ "$NODE" = a ]; then MGMT=$MGMT_A PEER_MGMT=$MGMT_B; else MGMT=$MGMT_B PEER_MGMT=$MGMT_A; fi

# pair_up RAIL_ADDR MTU: this node's name (the reports name the nodes by it), the management
# network on eth1, the rail address on eth0 with MTU, rxe0 on eth0.
pair_up() {
    hostname "node-$NODE"
    modules
    echo 0 > /proc/sys/net/ipv6/conf/eth1/accept_dad
    $IP link set dev eth1 up
    $IP addr add "$MGMT/24" dev eth1
    ADDR=$1
    net_up eth0 "$2"
    rxe_add eth0
    ulimit -l unlimited
}

# rail_readdress ADDR: move eth0's rail address (rxe0's RoCE v2 GID follows it).
rail_readdress() {
    $IP addr flush dev eth0 scope global
    ADDR=$1
    $IP addr add "$ADDR/24" dev eth0
    wait_for 60 has_roce_v2_gid || log "rxe0: no RoCE v2 GID for $ADDR after 60 s"
    log "eth0 now $ADDR, RoCE v2 GID index $(kernel_gid_index)"
}

# gdr_pair NAME PORT [ARGS...]: one two-node write test, node a listening on PORT, node b
# connecting to it over the management network; both through rxe0, host memory (rxe registers
# no GPU memory), 64 KiB messages, few iterations (ITERS, DURATION_MS: at most 50 WRITEs or
# 0.5 s per direction) since rxe under TCG moves 0.1-0.4 Gb/s. Each step has its own port, so that the two nodes stay in step: each waits for the
# other's side of the same step. TOKEN names the token file (default: the shared one).
# Leaves NAME.json (the report), NAME.txt (human), NAME.err, NAME.rc and NAME.seconds in /tmp.
gdr_pair() {
    name=$1 port=$2
    shift 2
    if [ "$NODE" = a ]; then role="--listen 0.0.0.0:$port"; else role="--peer $PEER_MGMT:$port"; fi
    log "node $NODE: gdrdoctor gdr-test $role $*"
    read -r t0 _ < /proc/uptime
    # shellcheck disable=SC2086
    gdrdoctor gdr-test $role --token-file "${TOKEN:-/etc/gdrdoctor/token}" --rails rxe0 \
        --memory host --size 64K --iters "${ITERS:-50}" --duration-ms "${DURATION_MS:-500}" --wait 120 \
        --output "human:/tmp/$name.txt" --format json "$@" > "/tmp/$name.json" 2> "/tmp/$name.err"
    echo $? > "/tmp/$name.rc"
    read -r t1 _ < /proc/uptime
    echo "$t0 $t1" | awk '{ print $2 - $1 }' > "/tmp/$name.seconds"
    log "node $NODE: $name exit $(cat "/tmp/$name.rc") after $(cat "/tmp/$name.seconds") s"
}

# send_pair NAME...: the files gdr_pair left, back to the host.
send_pair() {
    for n in "$@"; do
        for f in "$n.json" "$n.txt" "$n.err" "$n.rc" "$n.seconds"; do
            [ -f "/tmp/$f" ] && send "$f" "/tmp/$f"
        done
    done
}

# comparator_pair GID: ib_write_bw from node b (client) into node a (server) through the rail,
# its exchange over the management network, 64 KiB messages like gdr_pair's, retried like
# comparator_write_bw: a run that completes no iteration or fails says nothing about gdrdoctor
# (-D 4, then 8, then 16 s). The client decides; node a's server runs once per attempt and
# learns from node b, over TCP port 18600 of the management network, whether another follows.
# Node b leaves perftest.txt and perftest-attempts.txt in /tmp.
comparator_pair() {
    : > /tmp/perftest-attempts.txt
    for d in 4 8 16; do
        if [ "$NODE" = a ]; then
            log "node a: ib_write_bw server (GID $1), -D $d"
            timeout $((d + 120)) ib_write_bw -d rxe0 -x "$1" -s 65536 -D "$d" -F --report_gbits > "/tmp/perftest-server-$d.txt" 2>&1
            next=$(timeout 120 nc -l -p 18600 </dev/null)
            log "node a: node b says $next"
            [ "$next" = again ] || return 0
        else
            # The server listens once node a's previous step is over: connect until it does.
            n=0
            while :; do
                timeout $((d + 60)) ib_write_bw -d rxe0 -x "$1" -s 65536 -D "$d" -F --report_gbits "$PEER_MGMT" > /tmp/perftest.txt 2>&1
                rc=$?
                grep -q "Couldn't connect" /tmp/perftest.txt || break
                n=$((n + 1))
                [ $n -lt 600 ] || break
                sleep 0.1
            done
            iters=$(awk '$1 ~ /^[0-9]+$/ && NF >= 4 { n = $2 } END { print n + 0 }' /tmp/perftest.txt)
            echo "attempt -D $d: exit $rc, $iters iterations" >> /tmp/perftest-attempts.txt
            verdict=again
            if [ $rc = 0 ] && [ "$iters" -gt 0 ]; then verdict=stop; fi
            [ $d = 16 ] && verdict=stop
            # Node a listens for the verdict once its server has ended.
            n=0
            until echo "$verdict" | nc "$PEER_MGMT" 18600 2>/dev/null; do
                n=$((n + 1))
                [ $n -lt 600 ] || break
                sleep 0.1
            done
            log "node b: ib_write_bw -D $d: exit $rc, $iters iterations"
            if [ "$verdict" = stop ]; then
                if [ $rc = 0 ] && [ "$iters" -gt 0 ]; then
                    echo "comparator ok" >> /tmp/perftest-attempts.txt
                    return 0
                fi
                echo "comparator failed" >> /tmp/perftest-attempts.txt
                return 1
            fi
        fi
    done
}
