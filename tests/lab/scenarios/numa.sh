# A second NUMA node with a PCIe expander bridge: an accelerator on node 1 (81:00.0) besides the
# one behind the switch; the NIC stays on the first root bus (the VM reports node -1 there).
TOPO=numa
IOMMU=pt
guest() {
    modules
    net_up eth0 9000
    rxe_add eth0
}
EXPECT='
exit 0
json node.gpus 2
json inventory.gpus[bdf=0000:81:00.0].numa_node 1
json inventory.gpus[bdf=0000:04:00.0].numa_node -1
json inventory.rdma_devices[name=rxe0].pci 0000:03:00.0
json inventory.rdma_devices[name=rxe0].numa_node -1
'
