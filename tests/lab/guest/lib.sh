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

# net_up IFACE [MTU]: bring IFACE up with the lab address and wait for the carrier (~1.8 s).
net_up() {
    echo 0 > "/proc/sys/net/ipv6/conf/$1/accept_dad" # skip ~2 s of IPv6 duplicate detection
    [ -n "${2:-}" ] && $IP link set dev "$1" mtu "$2"
    $IP link set dev "$1" up
    $IP addr add "$ADDR/24" dev "$1"
    i=0
    while [ "$(cat "/sys/class/net/$1/carrier" 2>/dev/null)" != 1 ] && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    log "$1 up, mtu $(cat "/sys/class/net/$1/mtu"), carrier $(cat "/sys/class/net/$1/carrier")"
}

# rxe_add IFACE: Soft-RoCE device rxe0 on IFACE; waits for the port and its GIDs.
rxe_add() {
    rdma link add rxe0 type rxe netdev "$1" || log "rdma link add failed"
    p=/sys/class/infiniband/rxe0/ports/1
    i=0
    while [ "$(cat $p/state 2>/dev/null)" != "4: ACTIVE" ] && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    sleep 0.5 # the GIDs for the addresses land just after
    log "rxe0 port 1: $(cat $p/state) / $(cat $p/phys_state)"
}

# The index the kernel gave the RoCE v2 GID of $ADDR (::ffff:c000:0201), or "none".
kernel_gid_index() {
    p=/sys/class/infiniband/rxe0/ports/1
    [ -d $p ] || { echo none; return; }
    # One grep over every slot: a fork per slot costs seconds under TCG.
    grep -l '^0000:0000:0000:0000:0000:ffff:c000:0201$' $p/gids/* 2>/dev/null | while read -r f; do
        i=${f##*/}
        [ "$(cat $p/gid_attrs/types/"$i")" = "RoCE v2" ] && echo "$i"
    done | sort -n | head -n 1 | grep . || echo none
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
    log "reported"
}
