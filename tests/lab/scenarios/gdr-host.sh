# The GDR write test on a real kernel: rxe0 on eth0 (switch topology, IOMMU passthrough), host
# memory (rxe cannot register dma-bufs, and there is no GPU). The test passes with the data
# verified; ib_write_bw runs over the same device in the same guest for the bandwidth ratio (a
# comparator run that completes nothing is retried longer, and if it still fails the ratio is
# recorded as not evaluated); a dma-buf (virtio-gpu's DRM PRIME export) offered to rxe is
# refused with EOPNOTSUPP.
TOPO=switch
IOMMU=pt
guest() {
    rxe_node
    ulimit -l unlimited
    gid=$(kernel_gid_index)
    log "gdrdoctor gdr-test --memory host"
    gdrdoctor gdr-test --memory host --nic rxe0 --duration-ms 4000 --format json > /tmp/gdr-host.json 2> /tmp/gdr-host.err
    echo $? > /tmp/gdr-host.rc
    gdrdoctor gdr-test --memory host --nic rxe0 -v --color never > /tmp/gdr-host.txt 2>&1
    comparator_write_bw "$gid" || log "ib_write_bw: comparator failed (see perftest-attempts.txt)"
    log "gdrdoctor gdr-test --memory host-dmabuf"
    gdrdoctor gdr-test --memory host-dmabuf --nic rxe0 --format json > /tmp/gdr-dmabuf.json 2>&1
    gdrdoctor gdr-test --memory host-dmabuf --nic rxe0 -v --color never > /tmp/gdr-dmabuf.txt 2>&1
    for f in gdr-host.json gdr-host.rc gdr-host.err gdr-host.txt perftest.txt perftest-server.txt perftest-attempts.txt gdr-dmabuf.json gdr-dmabuf.txt; do
        send "$f" "/tmp/$f"
    done
}
EXPECT='
exit 0
check rdma-link pass
code gdr-test-not-run skip
file-code gdr-host.json gdr-test-pass pass
file-message gdr-host.json gdr-test-pass host path
file-message gdr-host.json gdr-test-pass 1 MiB verified both ways
file-json gdr-host.json inventory.gdr_test[0].result.verified_bytes 1048576
file-json gdr-host.json inventory.gdr_test[0].result.path host
file-json gdr-host.json inventory.gdr_test[0].result.port.link_layer Ethernet
file-json gdr-host.json verdict.exit_code 0
perftest-ratio gdr-host.json inventory.gdr_test[0].result.bandwidth.to_target_gbps perftest.txt 0.8
file-code gdr-dmabuf.json gdr-test-register-failed fail
file-message gdr-dmabuf.json gdr-test-register-failed EOPNOTSUPP
file-message gdr-dmabuf.json gdr-test-register-failed the NIC driver does not register dma-bufs
'
