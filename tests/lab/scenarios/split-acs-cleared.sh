# As split-phb, after clearing ACS Control on both root ports with setpci in the guest: the acs
# check passes (the placement is still PHB).
TOPO=split
IOMMU=pt
guest() {
    rxe_node
    for rp in 00:01.0 00:02.0; do
        log "$rp ACSCtl before: $(setpci -s $rp ECAP_ACS+0x6.w)"
        setpci -s $rp ECAP_ACS+0x6.w=0000
        log "$rp ACSCtl after: $(setpci -s $rp ECAP_ACS+0x6.w)"
    done
}
EXPECT='
exit 1
check acs pass
code acs-clear pass
nocode acs-redirect-on-path
check pcie-placement fail
'
