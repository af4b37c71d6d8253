# The stand-in nvidia_peermem module (tests/lab/fake_peermem) loaded: gdrdoctor sees it, and
# since it registers no peer-memory client, says so.
TOPO=switch
IOMMU=pt
guest() {
    modules
    modprobe nvidia_peermem || log "no fake nvidia_peermem (needs linux-headers)"
    net_up eth0 9000
    rxe_add eth0
}
EXPECT='
exit 0
check peer-memory warn
code peermem-not-registered warn
message peermem-not-registered nvidia_peermem is loaded but registered no peer-memory client
'
