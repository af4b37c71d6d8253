# As switch-pt, with the kernel's default translated IOMMU mode (intel_iommu=on alone: DMA-FQ).
TOPO=switch
IOMMU=lazy
guest() {
    rxe_node
}
EXPECT='
exit 1
check iommu fail
code iommu-translated fail
message iommu-translated type DMA-FQ (translated, lazy)
message iommu-translated intel_iommu=on
check rdma-link pass
check rdma-gid pass
'
