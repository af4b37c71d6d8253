# Two guests: what fails only between nodes (MTU 1500 vs 9000, GID pins that differ, different subnets, the peer's port down).
# One boot, four steps, each a two-node write test on its own port (lib.sh gdr_pair):
#  mtu:    node a's rail at MTU 1500 (rxe active MTU 1024), node b's at 9000 (4096): the queue
#          pairs connect at 1024, the report names the path MTU, and the test passes (a forced
#          4096 would hang while node a counts rx_length_errors);
#  gid:    node a pinned to GID index 0 (its link-local IPv6 GID), node b on its RoCE v2 IPv4
#          one: named before any packet, on both sides;
#  subnet: node b's rail moved to 10.9.1.2/24, node a's on 10.9.0.1/24, no route between them:
#          fails fast at connect, naming the peer's GID;
#  down:   node b's eth0 taken down (rxe0's port DOWN): named on b, and on a as b's.
NODES=2
guest() {
    if [ "$NODE" = a ]; then pair_up $RAIL_A 1500; else pair_up $RAIL_B 9000; fi
    gdr_pair mtu 18521
    if [ "$NODE" = a ]; then gdr_pair gid 18522 --gid-index 0; else gdr_pair gid 18522; fi
    [ "$NODE" = b ] && rail_readdress 10.9.1.2
    gdr_pair subnet 18523
    [ "$NODE" = b ] && netdev_down eth0
    gdr_pair down 18524
    send_pair mtu gid subnet down
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
# subnet: no route to the GID of the peer, named.
rc a/subnet.rc 1
rc b/subnet.rc 1
file-contains a/subnet.txt cannot reach node-b
file-contains a/subnet.txt GID ::ffff:10.9.1.2
file-contains b/subnet.txt cannot reach node-a
below a/subnet.seconds 15
# down: the port of node b, named on both sides.
rc a/down.rc 1
rc b/down.rc 1
file-contains b/down.txt rxe0 port 1 is DOWN
file-contains a/down.txt (on node-b)
below a/down.seconds 15
'
