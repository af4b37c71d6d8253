# PCIe AER errors inside two sample windows: a non-fatal Completion Timeout from QEMU on the
# switch's downstream port above the NIC (02:00.0, HMP), then, through the kernel's aer_inject,
# a correctable RxErr on the NIC next to the GPU (03:00.0) and a non-fatal Completion Timeout
# on the second NIC (05:00.0). link-health warns on the correctable, fails on the others, and
# on the link flap the kernel's recovery of each non-fatal error causes (it resets the NIC).
# The report after, one reading, shows them as history.
TOPO=switch
IOMMU=pt
HMP=1
ADDR_ETH1=198.51.100.1 # TEST-NET-2: eth1's hub port leads nowhere either
guest() {
    modules
    net_up eth0 9000
    rxe_add eth0
    # A second RDMA NIC puts 05:00.0 (and its root port) on a GPU-NIC path.
    net_on eth1 "$ADDR_ETH1"
    rxe_on rxe1 eth1 "$ADDR_ETH1"
    ulimit -l unlimited
    # 1: QEMU's injection on the switch downstream port dn1 (02:00.0), once the window is open
    # (first reading taken). Before aer_inject is loaded: while loaded, it serves the root
    # ports' error status registers from its own copies, and the kernel never sees QEMU's error.
    GDRDOCTOR_TRACE=1 gdrdoctor check --sample 15 --format json > /tmp/hmp.json 2> /tmp/hmp.err &
    check=$!
    wait_for 60 window_open /tmp/hmp.err || log "no sample window after 60 s"
    hmp_inject 0000:02:00.0 aer_dev_nonfatal pcie_aer_inject_error dn1 COMP_TIME
    wait $check
    echo $? > /tmp/hmp.rc
    log "check --sample 15 (HMP): exit $(cat /tmp/hmp.rc)"
    # The kernel's recovery resets the function below the port: eth0 goes down and up.
    wait_for 60 port_active || log "rxe0 not ACTIVE 60 s after the recovery"
    wait_for 60 has_roce_v2_gid || log "rxe0: no RoCE v2 GID again after the recovery"
    # 2: the endpoints, through aer_inject.
    modprobe aer_inject || log "modprobe aer_inject failed"
    GDRDOCTOR_TRACE=1 gdrdoctor check --sample 15 --format json > /tmp/aer.json 2> /tmp/aer.err &
    check=$!
    wait_for 60 window_open /tmp/aer.err || log "no sample window after 60 s"
    aer_inject 0000:03:00.0 aer_dev_correctable 0 0x1   # RxErr
    aer_inject 0000:05:00.0 aer_dev_nonfatal 0x4000 0   # CmpltTO
    wait $check
    echo $? > /tmp/aer.rc
    log "check --sample 15 (aer_inject): exit $(cat /tmp/aer.rc)"
    wait_for 60 dev_active rxe1 || log "rxe1 not ACTIVE 60 s after the recovery"
    wait_for 60 has_gid rxe1 "$ADDR_ETH1" || log "rxe1: no RoCE v2 GID again after the recovery"
    for b in 0000:02:00.0 0000:03:00.0 0000:05:00.0; do
        for f in aer_dev_correctable aer_dev_nonfatal aer_dev_fatal; do
            echo "# $b $f"
            cat "/sys/bus/pci/devices/$b/$f"
        done
    done > /tmp/aer-counters.txt
    dmesg > /tmp/dmesg.txt
    for f in hmp.json hmp.rc hmp.err aer.json aer.rc aer.err aer-counters.txt dmesg.txt; do
        send "$f" "/tmp/$f"
    done
}
EXPECT='
file-contains hmp.log OK id: dn1
file-finding hmp.json aer-uncorrectable-growing bridge 0000:02:00.0 | non-fatal +1 (CmpltTO +1)
file-finding hmp.json link-flapping rxe0 port 1 | link_downed +1
rc hmp.rc 1
file-code aer.json aer-correctable-growing warn
file-finding aer.json aer-correctable-growing 0000:03:00.0 | correctable +1 (RxErr +1)
file-code aer.json aer-uncorrectable-growing fail
file-finding aer.json aer-uncorrectable-growing 0000:05:00.0 | non-fatal +1 (CmpltTO +1)
file-finding aer.json link-flapping rxe1 port 1 | link_downed +1
file-json aer.json verdict.exit_code 1
rc aer.rc 1
code aer-history skip
# The kernel logged each error (kernel-log): inside its window it is now; after, history.
file-finding hmp.json kernel-log-errors-now bridge 0000:02:00.0 | uncorrected (non-fatal) PCIe error CmpltTO
file-finding aer.json kernel-log-errors-now rxe1 (0000:05:00.0) | uncorrected (non-fatal) PCIe error CmpltTO
file-finding aer.json kernel-log-events-now rxe0 (0000:03:00.0) | corrected PCIe error RxErr
file-nocode aer.json kernel-log-clean
code kernel-log-pcie-uncorrected warn
code kernel-log-history skip
'
