# `gdrdoctor fix --apply --yes` on the split topology, whose two root ports have ACS redirect on:
# it runs the runtime blocks only (setpci on each root port), logs them, checks again and shows
# acs going from fail to pass; the report that follows (and its capture) has acs passing.
TOPO=split
IOMMU=pt
guest() {
    rxe_node
    ulimit -l unlimited
    gdrdoctor fix --class runtime > /tmp/fix-runtime.sh 2>&1
    gdrdoctor fix --apply --yes > /tmp/apply.txt 2>&1
    echo $? > /tmp/apply.rc
    gdrdoctor fix --apply --yes > /tmp/apply-again.txt 2>&1
    for f in fix-runtime.sh apply.txt apply.rc apply-again.txt; do send "$f" "/tmp/$f"; done
}
EXPECT='
check acs pass
code acs-clear pass
check pcie-placement fail
file-contains apply.txt [acs/acs-redirect-on-path] $ setpci -s 0000:00:01.0 ECAP_ACS+0x6.w=0000:002c
file-contains apply.txt [acs/acs-redirect-on-path] $ setpci -s 0000:00:02.0 ECAP_ACS+0x6.w=0000:002c
file-contains apply.txt acs: fail -> pass
file-count apply.txt -> ok 2
file-contains apply-again.txt nothing to apply: no runtime fix for a failure
file-contains fix-runtime.sh if [ $((0x$(setpci -s 0000:00:01.0 ECAP_ACS+0x6.w) & 0x002c)) -eq 0 ]; then
'
