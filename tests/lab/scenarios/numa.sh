# A second NUMA node with a PCIe expander bridge: an accelerator on node 1 (81:00.0) besides the
# one behind the switch; the NIC stays on the first root bus (the VM reports node -1 there). The
# far GPU meets the NIC across host bridges: NODE, since the kernel gives no NUMA node for the NIC
# (SYS would need it to say 0), and beyond the GDR level either way.
TOPO=numa
IOMMU=pt
guest() {
    rxe_node
}
EXPECT='
exit 1
message gpu-nic-near nearest NIC: rxe0 at PIX
message gpu-nic-too-far nearest NIC rxe0 at NODE
message gpu-nic-too-far NUMA nodes unknown: NODE assumed
json node.gpus 2
json inventory.gpus[bdf=0000:81:00.0].numa_node 1
json inventory.gpus[bdf=0000:04:00.0].numa_node -1
json inventory.rdma_devices[name=rxe0].pci 0000:03:00.0
json inventory.rdma_devices[name=rxe0].numa_node -1
'
