# Two guests: what fails only between nodes (MTU 1500 vs 9000, GID pins that differ, different subnets, the peer's port down).
# One boot, five steps, each a two-node write test on its own port (lib.sh gdr_pair):
#  mtu:    node a's rail at MTU 1500 (rxe active MTU 1024), node b's at 9000 (4096): the queue
#          pairs connect at 1024, the report names the path MTU, and the test passes (a forced
#          4096 would hang while node a counts rx_length_errors);
#  gid:    node a pinned to GID index 0 (its link-local IPv6 GID), node b on its RoCE v2 IPv4
#          one: named before any packet, on both sides;
#  subnet-l2: node b's rail moved to 10.9.1.2/24, node a's on 10.9.0.1/24, no route between
#          them, but one Ethernet segment: the test PASSES. The kernel resolves a RoCE v2
#          peer's MAC with the rail's netdev as the output interface (ib_resolve_eth_dmac), and
#          a route lookup bound to an interface that finds no route assumes the destination is
#          on that link: it ARPs for 10.9.1.2 on eth0, and node b answers (arp_ignore 0);
#  subnet: the same subnets, as a routed fabric has them: nobody on node a's segment answers
#          for node b's address (arp_ignore 2 on both: answer only requests from one's own
#          subnet). The kernel's address resolution times out at RTR (about 1 s): fails fast,
#          naming the peer's GID and the subnets;
#  down:   node b's eth0 taken down (rxe0's port DOWN): named on b, and on a as b's.
NODES=2
guest() {
    if [ "$NODE" = a ]; then pair_up $RAIL_A 1500; else pair_up $RAIL_B 9000; fi
    gdr_pair mtu 18521
    if [ "$NODE" = a ]; then gdr_pair gid 18522 --gid-index 0; else gdr_pair gid 18522; fi
    [ "$NODE" = b ] && rail_readdress 10.9.1.2
    gdr_pair subnet-l2 18523
    echo 2 > /proc/sys/net/ipv4/conf/eth0/arp_ignore
    $IP neigh flush dev eth0
    gdr_pair subnet 18525
    [ "$NODE" = b ] && netdev_down eth0
    gdr_pair down 18524
    send_pair mtu gid subnet-l2 subnet down
}
EXPECT='
# mtu: passes both ways at the smaller MTU, and says so.
rc a/mtu.rc 0
rc b/mtu.rc 0
file-json a/mtu.json rails[0].path_mtu 1024
file-json b/mtu.json rails[0].path_mtu 1024
file-json b/mtu.json rails[0].incoming.verified_bytes 65536
file-json b/mtu.json rails[0].outgoing.verified_bytes 65536
file-contains a/mtu.txt path MTU 1024 (this port
file-contains a/mtu.txt active MTU 1024, node-b
file-contains b/mtu.txt active MTU 4096, node-a
# gid: the families differ, named before any packet.
rc a/gid.rc 1
rc b/gid.rc 1
file-json a/gid.json rails[0].outgoing.failure.step GID
file-contains a/gid.txt (index 0) is IPv6 link-local
file-contains a/gid.txt ::ffff:10.9.0.2
file-contains b/gid.txt GID ::ffff:10.9.0.2
# subnet-l2: different subnets on one segment work (the kernel assumes the peer on-link).
rc a/subnet-l2.rc 0
rc b/subnet-l2.rc 0
file-json a/subnet-l2.json rails[0].incoming.verified_bytes 65536
# subnet: no route, and nobody answers for the address of the peer: named.
rc a/subnet.rc 1
rc b/subnet.rc 1
file-contains a/subnet.txt ibv_modify_qp to RTR: Connection timed out
file-contains a/subnet.txt no MAC address for node-b'"'"'s GID ::ffff:10.9.1.2
file-contains b/subnet.txt no MAC address for node-a'"'"'s GID ::ffff:10.9.0.1
below a/subnet.seconds 15
# down: the port of node b, named on both sides.
rc a/down.rc 1
rc b/down.rc 1
file-contains b/down.txt rxe0 port 1 is DOWN
file-contains a/down.txt (on node-b)
below a/down.seconds 15
'
