# The accelerator on a root port of its own, the NIC behind the switch on the other: they meet
# only in the host bridge (PHB, beyond NCCL's default GDR level), and both root ports on the path
# have ACS redirect enabled (QEMU's ACSCtl 0x001d).
TOPO=split
IOMMU=pt
guest() {
    rxe_node
}
EXPECT='
exit 1
check pcie-placement fail
code gpu-nic-too-far fail
message gpu-nic-too-far nearest NIC rxe0 at PHB
check acs fail
code acs-redirect-on-path fail
message acs-redirect-on-path ACSCtl 0x001d has ReqRedir, CmpltRedir set
fix acs-redirect-on-path setpci -s 0000:00:01.0 ECAP_ACS+0x6.w=0000
fix acs-redirect-on-path setpci -s 0000:00:02.0 ECAP_ACS+0x6.w=0000
json inventory.gpus[0].bdf 0000:04:00.0
'
