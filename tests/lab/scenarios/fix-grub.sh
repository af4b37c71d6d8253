# The rendered IOMMU fix on the default translated IOMMU, run twice in the guest against a copy of
# Debian's /etc/default/grub: the first run adds iommu=pt once (gdrdoctor edit kernel-args,
# the original kept as grub.gdrdoctor-orig), the second changes nothing.
TOPO=switch
IOMMU=lazy
guest() {
    rxe_node
    ulimit -l unlimited
    mkdir -p /etc/default
    cat > /etc/default/grub <<'GRUB'
# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""
GRUB
    cp /etc/default/grub /tmp/grub.before
    gdrdoctor fix --class persistent -o /tmp/fix.sh > /tmp/fix.log 2>&1
    bash /tmp/fix.sh > /tmp/run1.txt 2>&1; echo "rc $?" >> /tmp/run1.txt
    cp /etc/default/grub /tmp/grub.once
    bash /tmp/fix.sh > /tmp/run2.txt 2>&1; echo "rc $?" >> /tmp/run2.txt
    cp /etc/default/grub /tmp/grub.twice
    cp /etc/default/grub.gdrdoctor-orig /tmp/grub.orig
    for f in fix.sh fix.log run1.txt run2.txt grub.before grub.once grub.twice grub.orig; do send "$f" "/tmp/$f"; done
}
EXPECT='
check iommu fail
code iommu-translated fail
file-contains fix.sh "$GD" --root "${R:-/}" edit kernel-args --add iommu=pt
file-contains run1.txt rc 0
file-contains run2.txt rc 0
file-contains grub.once GRUB_CMDLINE_LINUX="iommu=pt"
file-count grub.once iommu=pt 1
same-file grub.once grub.twice
same-file grub.before grub.orig
file-contains grub.once GRUB_CMDLINE_LINUX_DEFAULT="quiet"
'
