# Two guests joined by a QEMU socket netdev: the two-node write test over RoCE v2 (rxe) both ways, ib_write_bw between them, a wrong token.
# gdrdoctor gdr-test --listen on a, --peer on b, the same token file; host memory (rxe registers
# no GPU memory), both directions, every byte verified, bandwidth and latency each way. Both
# reports are judged.
NODES=2
guest() {
    if [ "$NODE" = a ]; then pair_up $RAIL_A 9000; else pair_up $RAIL_B 9000; fi
    # The bandwidth run as long as the comparator's sampled part (up to 2 s per direction), so
    # that the ratio compares like with like under TCG's jitter.
    ITERS=1000 DURATION_MS=2000
    gdr_pair pair 18517
    ITERS= DURATION_MS=
    comparator_pair "$(kernel_gid_index)" || log "ib_write_bw: comparator failed (see perftest-attempts.txt)"
    # A wrong token: node b holds another one. Neither side tests anything.
    if [ "$NODE" = b ]; then TOKEN=/etc/gdrdoctor/wrong-token; fi
    gdr_pair token 18518
    TOKEN=
    send_pair pair token
    if [ "$NODE" = b ]; then
        for f in perftest.txt perftest-attempts.txt; do send "$f" "/tmp/$f"; done
    fi
}
EXPECT='
rc a/pair.rc 0
rc b/pair.rc 0
file-json a/pair.json role listener
file-json b/pair.json role connector
file-json a/pair.json peer node-b
file-json b/pair.json peer node-a
file-json a/pair.json rails[0].outgoing.verified_bytes 65536
file-json a/pair.json rails[0].incoming.verified_bytes 65536
file-json b/pair.json rails[0].outgoing.verified_bytes 65536
file-json b/pair.json rails[0].incoming.verified_bytes 65536
file-json a/pair.json rails[0].setup.path host
file-json a/pair.json rails[0].peer_path host
file-json b/pair.json rails[0].setup.path host
file-json b/pair.json rails[0].peer_path host
# rxe on an MTU 9000 netdev: active MTU 4096, its largest.
file-json a/pair.json rails[0].path_mtu 4096
file-json b/pair.json rails[0].path_mtu 4096
file-contains a/pair.txt out PASS node-a rxe0 port 1 -> node-b rxe0 port 1
file-contains a/pair.txt in  PASS node-b rxe0 port 1 -> node-a rxe0 port 1
file-contains b/pair.txt ready: 1 rail(s) pass both ways
positive b/pair.json rails[0].outgoing.gbps
positive b/pair.json rails[0].outgoing.latency_us
positive a/pair.json rails[0].outgoing.gbps
positive a/pair.json rails[0].outgoing.latency_us
# The wrong token: refused on both sides (exit 2, `auth`), quickly, nothing tested.
rc a/token.rc 2
rc b/token.rc 2
file-json a/token.json error_class auth
file-json b/token.json error_class auth
file-contains a/token.txt its proof does not match this token
file-contains b/token.txt the peer refused this side
file-json a/token.json rails []
below b/token.seconds 10
perftest-ratio b/pair.json rails[0].outgoing.gbps b/perftest.txt 0.5
'
