# The peer-memory block of a rendered fix script, in a real kernel: the script gdrdoctor writes
# for the peermem-missing-proprietary fixture (rendered on the host, --class runtime) loads the
# stand-in nvidia_peermem module; run again, it changes nothing.
TOPO=switch
IOMMU=pt
host_prepare() {
    mkdir -p "$1/root"
    # The fixture is generated, not committed (fixtures/README.md): built beside the overlay,
    # which goes into the guest.
    local fixture
    fixture=$(dirname "$1")/fixture
    rm -rf "$fixture"
    "$REPO/fixtures/build.sh" peermem-missing-proprietary "$fixture" >/dev/null
    "$GDRDOCTOR" --root "$fixture" fix --class runtime -o "$1/root/peermem-fix.sh" 2>/dev/null
}
guest() {
    rxe_node
    grep -c '^nvidia_peermem ' /proc/modules > /tmp/before.txt || true
    bash /root/peermem-fix.sh > /tmp/run1.txt 2>&1; echo "rc $?" >> /tmp/run1.txt
    grep '^nvidia_peermem ' /proc/modules > /tmp/after.txt || true
    bash /root/peermem-fix.sh > /tmp/run2.txt 2>&1; echo "rc $?" >> /tmp/run2.txt
    for f in before.txt run1.txt after.txt run2.txt; do send "$f" "/tmp/$f"; done
    send peermem-fix.sh /root/peermem-fix.sh
}
EXPECT='
file-contains before.txt 0
file-contains peermem-fix.sh modprobe nvidia-peermem
file-contains run1.txt [1] runtime: peermem-not-loaded
file-contains run1.txt rc 0
file-contains after.txt nvidia_peermem
file-contains run2.txt [1] already done: modprobe nvidia-peermem
file-contains run2.txt rc 0
code peermem-not-registered warn
'
