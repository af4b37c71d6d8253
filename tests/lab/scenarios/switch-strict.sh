# As switch-pt, with strict IOMMU translation (intel_iommu=on iommu.strict=1: DMA).
TOPO=switch
IOMMU=strict
guest() {
    rxe_node
}
EXPECT='
exit 1
check iommu fail
code iommu-translated fail
message iommu-translated type DMA (translated, strict)
fix iommu-translated iommu=pt
fix iommu-translated --remove iommu.strict=1
'
