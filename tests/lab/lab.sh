#!/usr/bin/env bash
# The lab: gdrdoctor inside a real Linux kernel (Debian's, under QEMU/TCG) with an emulated PCIe
# switch, ACS, an IOMMU and Soft-RoCE (rxe), one VM boot per scenario.
#
#   tests/lab/lab.sh                  # every scenario in tests/lab/scenarios/
#   tests/lab/lab.sh switch-pt numa   # some, by name
#   tests/lab/lab.sh --list
#   tests/lab/lab.sh --save-fixture   # also save switch-pt's capture as fixtures/lab-switch-pt/capture.tar.gz
#
# Each scenario file (POSIX sh) sets TOPO (switch|numa) and IOMMU (pt|lazy|strict|off), defines
# guest() (node setup, run in the VM before gdrdoctor) and EXPECT (assertions, see expect.py).
# Opt-in: NIC_LINK=1 joins the switch topology's two NICs on one QEMU hub (eth0 <-> eth1);
# HMP=1 opens QEMU's monitor and sends it each `LAB_HMP <command>` line the guest prints.
# The guest runs gdrdoctor live, captures, checks the capture; results come back over a serial
# port. Work and results: target/lab/ (results/<scenario>/). Needs root (apt, QEMU).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WORK=${LAB_WORK:-$REPO/target/lab}
# A guest that never powers off is stopped after this many seconds. A scenario takes 10 to 60 s
# alone; the limit leaves room for a host loaded by other work, since it only catches a hang.
TIMEOUT=${LAB_TIMEOUT:-600}
SAVE_FIXTURE=0

scenarios=()
for a in "$@"; do
    case "$a" in
        --list) for f in "$HERE"/scenarios/*.sh; do printf '%-16s %s\n' "$(basename "$f" .sh)" "$(sed -n '1s/^# //p' "$f")"; done; exit 0 ;;
        --save-fixture) SAVE_FIXTURE=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        -*) echo "lab: unknown option $a" >&2; exit 2 ;;
        *) [ -f "$HERE/scenarios/$a.sh" ] || { echo "lab: no scenario $a (--list)" >&2; exit 2; }; scenarios+=("$a") ;;
    esac
done
if [ ${#scenarios[@]} -eq 0 ]; then
    for f in "$HERE"/scenarios/*.sh; do scenarios+=("$(basename "$f" .sh)"); done
fi

say() { printf 'lab: %s\n' "$*" >&2; }

# ------------------------------------------------------------------------------ packages --
need=()
for p in qemu-system-x86 busybox-static cpio linux-image-amd64 linux-headers-amd64 kmod rdma-core \
         ibverbs-providers perftest iproute2 pciutils make gcc python3; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
KVER=$(ls /boot/vmlinuz-* | sed 's|^/boot/vmlinuz-||' | grep -v -- '-rt-' | sort -V | tail -n 1)
[ -d "/lib/modules/$KVER/kernel" ] || { say "no modules for kernel $KVER"; exit 2; }
mkdir -p "$WORK"

# ------------------------------------------------------------------ kernel and gdrdoctor --
# The uncompressed vmlinux boots through its PVH entry point, skipping a decompressor that
# takes seconds under TCG.
VMLINUX=$WORK/vmlinux-$KVER
if [ ! -s "$VMLINUX" ]; then
    python3 - "/boot/vmlinuz-$KVER" "$VMLINUX" <<'PY'
import lzma, sys
data = open(sys.argv[1], "rb").read()
start = data.find(b"\xfd7zXZ\x00")
elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:])
assert start > 0 and elf[:4] == b"\x7fELF", "no XZ-compressed ELF in the bzImage"
open(sys.argv[2], "wb").write(elf)
PY
fi
(cd "$REPO" && cargo build --release --locked -q)
GDRDOCTOR=${CARGO_TARGET_DIR:-$REPO/target}/release/gdrdoctor

# ----------------------------------------------------------------------- base initramfs --
# Busybox, the kernel modules, iproute2's ip, rdma and tc, libibverbs with the rxe provider (for
# the live rdma-access check), and the stand-in nvidia_peermem. Rebuilt when this script changes.
# sch_netem and aer_inject are there for the fault scenarios (packet loss, injected AER errors);
# busybox has a tc applet of its own that lacks netem: the guest calls /usr/sbin/tc.
BASE=$WORK/base-$KVER
usr_path() { case "$1" in /lib/*|/lib64/*|/bin/*|/sbin/*) echo "/usr$1" ;; *) echo "$1" ;; esac; }
copy_elf() { # SRC [DST]: a binary and every library ldd names, at merged-/usr paths
    local src=$1 dst d t
    dst=$(usr_path "${2:-$1}")
    mkdir -p "$R$(dirname "$dst")"
    cp -L "$src" "$R$dst"
    for d in $(ldd "$src" 2>/dev/null | grep -o '/[^ ]*'); do
        t=$(usr_path "$d")
        [ -e "$R$t" ] || { mkdir -p "$R$(dirname "$t")"; cp -L "$d" "$R$t"; }
    done
}
build_base() {
    R=$BASE/root
    rm -rf "$BASE"
    mkdir -p "$R"/usr/{bin,sbin,lib,lib64} "$R"/{dev,proc,sys,tmp,run,etc/gdrdoctor,root,bb}
    ln -s usr/bin "$R/bin"; ln -s usr/sbin "$R/sbin"; ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"
    cp /bin/busybox "$R/bb/busybox"
    for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -s busybox "$R/bb/$a"; done
    copy_elf /usr/sbin/ip
    copy_elf /usr/bin/rdma
    copy_elf /usr/sbin/tc
    copy_elf /usr/bin/setpci
    copy_elf /usr/bin/ib_write_bw
    # What rendered fix scripts run with on a real node: bash, GNU sed and grep.
    copy_elf /bin/bash
    copy_elf /bin/sed
    copy_elf /bin/grep
    local lib=/usr/lib/x86_64-linux-gnu
    copy_elf "$lib/libibverbs.so.1"
    copy_elf "$lib/libibverbs/librxe-rdmav34.so"
    mkdir -p "$R/etc/libibverbs.d"; cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
    for l in libgcc_s.so.1 libm.so.6 libc.so.6; do copy_elf "/lib/x86_64-linux-gnu/$l"; done
    echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"
    echo 'root:x:0:' > "$R/etc/group"
    local m f
    for m in e1000e virtio_pci virtio_gpu crc32_generic rdma_rxe ib_uverbs rdma_ucm sch_netem aer_inject; do
        for f in $(modprobe -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'); do
            mkdir -p "$R$(dirname "$f")"; cp -n "$f" "$R$f"
        done
    done
    cp "/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} "$R/lib/modules/$KVER/"
    if [ -d "/lib/modules/$KVER/build" ]; then
        mkdir -p "$BASE/kmod"; cp "$HERE"/fake_peermem/* "$BASE/kmod/"
        if make -C "/lib/modules/$KVER/build" M="$BASE/kmod" modules > "$BASE/kmod/build.log" 2>&1; then
            mkdir -p "$R/lib/modules/$KVER/extra"; cp "$BASE/kmod/nvidia_peermem.ko" "$R/lib/modules/$KVER/extra/"
        else
            say "fake nvidia_peermem not built: $BASE/kmod/build.log"
        fi
    fi
    depmod -b "$R" "$KVER"
    # init: mount the pseudo file systems, run /guest.sh with its output on ttyS1, power off.
    cat > "$R/init" <<'INIT'
#!/bb/sh
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/bb
/bb/mount -t proc proc /proc
/bb/mount -t sysfs sysfs /sys
/bb/mount -t devtmpfs devtmpfs /dev
/bb/mount -t tmpfs tmpfs /tmp
/bb/mount -t tmpfs tmpfs /run
echo /bb/modprobe > /proc/sys/kernel/modprobe
/usr/sbin/ip link set lo up
cd /root
/bb/sh /guest.sh > /dev/ttyS1 2>&1
echo "LAB_RC=$?" > /dev/ttyS1
sync
/bb/poweroff -f
INIT
    chmod +x "$R/init"
    (cd "$R" && find . | cpio -o -H newc --quiet) > "$BASE/base.cpio"
    sha256sum "$0" | cut -d' ' -f1 > "$BASE/stamp"
}
if [ ! -f "$BASE/stamp" ] || [ "$(cat "$BASE/stamp")" != "$(sha256sum "$0" | cut -d' ' -f1)" ]; then
    say "building the base initramfs for $KVER"
    build_base
fi

# ------------------------------------------------------------------------------ topology --
# q35 guest:
#   00:01.0 root port rp1 (ACS)
#     01:00.0 XIO3130 switch upstream
#       02:00.0 downstream -> 03:00.0 e1000e = eth0 (rxe0 goes on it)
#       02:01.0 downstream -> 04:00.0 virtio-gpu 1af4:1050 (the accelerator)
#   00:02.0 root port rp2 -> 05:00.0 e1000e = eth1
#   numa: + NUMA node 1 with a PCIe expander bridge (bus 0x80) -> 81:00.0 virtio-gpu
#   split: the accelerator moves to rp2 (05:00.0): NIC and GPU meet only in the host bridge (PHB)
# The NICs sit on hub ports with nothing else on the hub: no frame leaves the VM. NIC_LINK=1
# (switch): both on hub 1, so that eth0's frames reach eth1 and back (still none leaves the VM).
# QEMU's monitor (HMP=1) names the ports by their ids: rp1, up1, dn1 (02:00.0), dn2, rp2.
topology() {
    local hub2=2
    [ "${NIC_LINK:-0}" = 1 ] && hub2=1
    local sw="-netdev hubport,id=n1,hubid=1 -netdev hubport,id=n2,hubid=$hub2
        -device pcie-root-port,id=rp1,chassis=1,addr=01.0
        -device x3130-upstream,id=up1,bus=rp1
        -device xio3130-downstream,id=dn1,bus=up1,chassis=2,slot=0
        -device xio3130-downstream,id=dn2,bus=up1,chassis=3,slot=1
        -device e1000e,netdev=n1,bus=dn1,romfile=,mac=52:54:00:00:00:01
        -device virtio-gpu-pci,bus=dn2
        -device pcie-root-port,id=rp2,chassis=4,addr=02.0
        -device e1000e,netdev=n2,bus=rp2,romfile=,mac=52:54:00:00:00:02"
    case "$1" in
        switch) echo "$sw" ;;
        split) echo "-netdev hubport,id=n1,hubid=1
        -device pcie-root-port,id=rp1,chassis=1,addr=01.0
        -device x3130-upstream,id=up1,bus=rp1
        -device xio3130-downstream,id=dn1,bus=up1,chassis=2,slot=0
        -device e1000e,netdev=n1,bus=dn1,romfile=,mac=52:54:00:00:00:01
        -device pcie-root-port,id=rp2,chassis=4,addr=02.0
        -device virtio-gpu-pci,bus=rp2" ;;
        numa) echo "$sw
        -object memory-backend-ram,id=m0,size=512M -object memory-backend-ram,id=m1,size=512M
        -numa node,nodeid=0,memdev=m0,cpus=0 -numa node,nodeid=1,memdev=m1,cpus=1
        -device pxb-pcie,id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0,addr=04.0
        -device pcie-root-port,id=rp3,bus=pxb1,chassis=5,addr=00.0
        -device virtio-gpu-pci,bus=rp3" ;;
        *) say "unknown TOPO $1"; exit 2 ;;
    esac
}

# hmp_follower RESULT_LOG SOCKET HMP_LOG: follows the guest's output as QEMU writes it, sends
# each `LAB_HMP <command>` line to the monitor at SOCKET and appends the command and QEMU's
# answer to HMP_LOG. Nothing flows back to the guest: it polls sysfs for the error's effect.
# Run in the background: python replaces the subshell, so that $! is the process to stop.
hmp_follower() {
    exec python3 - "$@" <<'PY'
import os, re, socket, sys, time
log, sock, out = sys.argv[1:4]

def send(cmd):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sock)
    buf = b""
    def prompt():
        nonlocal buf
        while not buf.rstrip().endswith(b"(qemu)"):
            d = s.recv(4096)
            if not d:
                break
            buf += d
    prompt()  # the banner
    buf = b""
    s.sendall(cmd.encode() + b"\n")
    prompt()
    s.close()
    # The monitor echoes the command line, with terminal escapes, before its answer.
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", buf.decode(errors="replace")).replace("\r", "")
    return "\n".join(l for l in text.split("\n") if l.strip() and l.strip() != "(qemu)" and cmd not in l)

while not os.path.exists(log):
    time.sleep(0.05)
f = open(log, errors="replace")
part = ""
while True:
    chunk = f.readline()
    if not chunk:
        time.sleep(0.05)
        continue
    part += chunk
    if not part.endswith("\n"):
        continue
    line, part = part.strip(), ""
    if line.startswith("LAB_RC="):
        break
    if line.startswith("LAB_HMP "):
        cmd = line[8:]
        t = time.time()
        try:
            answer = send(cmd)
        except OSError as e:
            answer = f"ERROR {e!r}"
        with open(out, "a") as o:
            o.write(f"> {cmd}\n{answer}\n({time.time() - t:.2f} s)\n")
PY
}

# ------------------------------------------------------------------------------ scenarios --
run_scenario() {
    local name=$1 out=$WORK/results/$1
    local TOPO IOMMU EXPECT NODES=1 NIC_LINK=0 HMP=0
    unset -f host_prepare
    # shellcheck disable=SC1090
    . "$HERE/scenarios/$name.sh"
    if [ "$NODES" = 2 ]; then
        run_pair "$name" "$out"
        return
    fi
    rm -rf "$out"; mkdir -p "$out/overlay/usr/local/bin" "$out/overlay/etc/gdrdoctor"
    printf '%s\n' "$EXPECT" > "$out/expect.txt"
    # The guest script: the helpers, the scenario (its guest()), then setup and report.
    { cat "$HERE/guest/lib.sh" "$HERE/scenarios/$name.sh"; printf '\nguest\nreport\n'; } > "$out/overlay/guest.sh"
    cp "$GDRDOCTOR" "$out/overlay/usr/local/bin/gdrdoctor"
    cp "$HERE/config.yaml" "$out/overlay/etc/gdrdoctor/config.yaml"
    # A scenario may prepare files on the host for the guest (host_prepare OVERLAY_DIR).
    if declare -F host_prepare >/dev/null; then host_prepare "$out/overlay"; fi
    (cd "$out/overlay" && find . | cpio -o -H newc --quiet) > "$out/overlay.cpio"
    cat "$BASE/base.cpio" "$out/overlay.cpio" | gzip -1 > "$out/initrd.gz"

    # no_timer_check: the kernel checks at boot that the timer interrupt arrives within a busy
    # wait of ten ticks, and panics if not ("timer doesn't work through Interrupt-remapped
    # IO-APIC"). Under TCG on a loaded host QEMU's timer thread can miss that window (4 of 28
    # boots failed so with a cargo build running); KVM guests skip the check the same way.
    local kapp="console=ttyS0 panic=-1 rdinit=/init quiet loglevel=3 no_timer_check" iommu=
    case "$IOMMU" in
        pt) kapp="$kapp intel_iommu=on iommu=pt"; iommu="-device intel-iommu,intremap=on" ;;
        lazy) kapp="$kapp intel_iommu=on"; iommu="-device intel-iommu,intremap=on" ;;
        strict) kapp="$kapp intel_iommu=on iommu.strict=1"; iommu="-device intel-iommu,intremap=on" ;;
        off) ;;
        *) say "unknown IOMMU $IOMMU"; exit 2 ;;
    esac
    # HMP=1: QEMU's monitor on a socket of the results (for pcie_aer_inject_error and such).
    local monitor=none
    [ "$HMP" = 1 ] && monitor="unix:$out/mon.sock,server=on,wait=off"
    # shellcheck disable=SC2046,SC2086
    local cmd=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m 1024 -smp 2
        -machine q35,kernel-irqchip=split $iommu
        -nodefaults -no-user-config -display none -vga none -no-reboot
        -kernel "$VMLINUX" -initrd "$out/initrd.gz" -append "$kapp"
        -chardev "file,id=c0,path=$out/console.log" -serial chardev:c0
        -chardev "file,id=c1,path=$out/result.log" -serial chardev:c1
        -monitor "$monitor" $(topology "$TOPO"))
    echo "${cmd[*]}" > "$out/qemu-cmd.txt"
    local t0=$SECONDS rc=0 follower=
    if [ "$HMP" = 1 ]; then
        hmp_follower "$out/result.log" "$out/mon.sock" "$out/hmp.log" &
        follower=$!
    fi
    timeout "$TIMEOUT" "${cmd[@]}" > "$out/qemu.log" 2>&1 || rc=$?
    if [ -n "$follower" ]; then
        kill "$follower" 2>/dev/null || true
        wait "$follower" 2>/dev/null || true
    fi
    unpack "$out/result.log" "$out"
    if [ ! -f "$out/live.json" ]; then
        say "FAIL $name: the guest sent no report (qemu exit $rc, $((SECONDS - t0)) s); see $out/result.log and console.log"
        tail -n 20 "$out/result.log" >&2 || true
        return 1
    fi
    # The capture unpacked on the host must report what the guest saw live.
    rm -rf "$out/capture"; mkdir -p "$out/capture"
    tar xzf "$out/cap.tar.gz" -C "$out/capture"
    "$GDRDOCTOR" --config "$HERE/config.yaml" --root "$out/capture" check --format json > "$out/host-offline.json" || true
    judge "$name" "$out" "$out/host-offline.json" "$t0"
}

# ------------------------------------------------------------------- two-node scenarios --
# NODES=2: two guests, node a and node b, each `-smp 1`, joined by QEMU socket netdevs (a
# listens on a free port of 127.0.0.1, b connects): eth0 is the rail (rxe0 goes on it), eth1 the
# management network the control connection and perftest's exchange use, as on a cluster. Each
# guest runs the scenario's guest() (NODE=a or b in /etc/lab-node) and sends its files back;
# they are unpacked into results/<scenario>/a and b, and EXPECT names them as a/FILE, b/FILE.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# listening PORT: a socket of this host listens on 127.0.0.1:PORT (/proc/net/tcp, state 0A).
listening() {
    grep -qs "$(printf ': 0100007F:%04X 00000000:0000 0A' "$1")" /proc/net/tcp
}
unpack() { # RESULT_LOG DIR: the files a guest sent (=== LAB-FILE name / base64 / === LAB-END name)
    python3 - "$1" "$2" <<'PY'
import base64, os, sys
name, chunks = None, []
for line in open(sys.argv[1], errors="replace"):
    line = line.rstrip("\r\n")
    if line.startswith("=== LAB-FILE "):
        name, chunks = line[13:], []
    elif line.startswith("=== LAB-END ") and name:
        open(os.path.join(sys.argv[2], name), "wb").write(base64.b64decode("".join(chunks)))
        name = None
    elif name:
        chunks.append(line)
PY
}
run_pair() {
    local name=$1 out=$2 node
    rm -rf "$out"; mkdir -p "$out"
    printf '%s\n' "$EXPECT" > "$out/expect.txt"
    local rail_port mgmt_port
    rail_port=$(free_port); mgmt_port=$(free_port)
    while [ "$mgmt_port" = "$rail_port" ]; do mgmt_port=$(free_port); done
    for node in a b; do
        local ov=$out/$node/overlay
        mkdir -p "$ov/usr/local/bin" "$ov/etc/gdrdoctor"
        { cat "$HERE/guest/lib.sh" "$HERE/scenarios/$name.sh"; printf '\nguest\n'; } > "$ov/guest.sh"
        echo "$node" > "$ov/etc/lab-node"
        cp "$GDRDOCTOR" "$ov/usr/local/bin/gdrdoctor"
        cp "$HERE/config.yaml" "$ov/etc/gdrdoctor/config.yaml"
        # The token both nodes share (fresh per run), and another for the wrong-token case.
        head -c 32 /dev/urandom | base64 > "$ov/etc/gdrdoctor/token"
        head -c 32 /dev/urandom | base64 > "$ov/etc/gdrdoctor/wrong-token"
        chmod 600 "$ov"/etc/gdrdoctor/*token
        if declare -F host_prepare >/dev/null; then host_prepare "$ov"; fi
    done
    cp "$out/a/overlay/etc/gdrdoctor/token" "$out/b/overlay/etc/gdrdoctor/token"
    for node in a b; do
        (cd "$out/$node/overlay" && find . | cpio -o -H newc --quiet) > "$out/$node/overlay.cpio"
        cat "$BASE/base.cpio" "$out/$node/overlay.cpio" | gzip -1 > "$out/$node/initrd.gz"
    done
    local kapp="console=ttyS0 panic=-1 rdinit=/init quiet loglevel=3 no_timer_check"
    local t0=$SECONDS pids=() rc_a=0 rc_b=0
    for node in a b; do
        local mode=listen mac=0a
        [ "$node" = b ] && { mode=connect; mac=0b; }
        local cmd=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m 768 -smp 1
            -machine q35 -nodefaults -no-user-config -display none -vga none -no-reboot
            -kernel "$VMLINUX" -initrd "$out/$node/initrd.gz" -append "$kapp"
            -chardev "file,id=c0,path=$out/$node/console.log" -serial chardev:c0
            -chardev "file,id=c1,path=$out/$node/result.log" -serial chardev:c1
            -monitor none
            -netdev "socket,id=n0,$mode=127.0.0.1:$rail_port"
            -device pcie-root-port,id=rp1,chassis=1,addr=01.0
            -device "e1000e,netdev=n0,bus=rp1,romfile=,mac=52:54:00:00:$mac:01"
            -netdev "socket,id=n1,$mode=127.0.0.1:$mgmt_port"
            -device pcie-root-port,id=rp2,chassis=2,addr=02.0
            -device "e1000e,netdev=n1,bus=rp2,romfile=,mac=52:54:00:00:$mac:02")
        echo "${cmd[*]}" > "$out/$node/qemu-cmd.txt"
        timeout "$TIMEOUT" "${cmd[@]}" > "$out/$node/qemu.log" 2>&1 &
        pids+=($!)
        if [ "$node" = a ]; then
            # b connects once, at start: wait until a's QEMU listens on both ports.
            local n=600
            while ! { listening "$rail_port" && listening "$mgmt_port"; }; do
                n=$((n - 1))
                if [ $n -le 0 ] || ! kill -0 "${pids[0]}" 2>/dev/null; then
                    say "FAIL $name: node a's QEMU does not listen on $rail_port/$mgmt_port; see $out/a/qemu.log"
                    kill "${pids[0]}" 2>/dev/null || true
                    return 1
                fi
                sleep 0.1
            done
        fi
    done
    wait "${pids[0]}" || rc_a=$?
    wait "${pids[1]}" || rc_b=$?
    for node in a b; do
        unpack "$out/$node/result.log" "$out/$node"
        if ! grep -q '^LAB_RC=' "$out/$node/result.log"; then
            say "FAIL $name: node $node did not finish (qemu exit a $rc_a, b $rc_b, $((SECONDS - t0)) s); see $out/$node/result.log and console.log"
            tail -n 20 "$out/$node/result.log" >&2 || true
            return 1
        fi
    done
    judge "$name" "$out" - "$t0"
}

# judge NAME OUT HOST_OFFLINE T0: expect.py's verdict on a scenario, and its line.
judge() {
    local name=$1 out=$2 t0=$4
    if python3 "$HERE/expect.py" "$out" "$out/expect.txt" "$3" > "$out/verdict.txt"; then
        say "PASS $name ($((SECONDS - t0)) s): $(tail -n 1 "$out/verdict.txt" | sed 's/^ *//')"
        # A comparator (ib_write_bw) that was retried, or failed and left its assertion unjudged.
        grep '^  comparator ' "$out/verdict.txt" >&2 || true
        if grep -q '^  comparator failed' "$out/verdict.txt"; then comparator_failed+=("$name"); fi
    else
        say "FAIL $name ($((SECONDS - t0)) s):"
        cat "$out/verdict.txt" >&2
        if [ -f "$out/live.txt" ]; then say "  live report: $out/live.txt"; else say "  results: $out"; fi
        return 1
    fi
}

failed=() comparator_failed=()
for s in "${scenarios[@]}"; do
    run_scenario "$s" || failed+=("$s")
done
if [ "$SAVE_FIXTURE" = 1 ]; then
    fixture=$REPO/fixtures/lab-switch-pt
    rm -rf "$fixture"; mkdir -p "$fixture"
    # The archive `gdrdoctor capture` wrote in the guest, as it is: the tests read it in place.
    cp "$WORK/results/switch-pt/cap.tar.gz" "$fixture/capture.tar.gz"
    cp "$HERE/config.yaml" "$fixture/config.yaml"
    # What gdrdoctor said live in the guest, for tests/fixtures.rs to compare with.
    mkdir -p "$fixture/reference"
    cp "$WORK/results/switch-pt/live.json" "$WORK/results/switch-pt/live.txt" "$fixture/reference/"
    sed "s#$REPO/##g" "$WORK/results/switch-pt/qemu-cmd.txt" > "$fixture/reference/qemu-cmd.txt"
    git -C "$REPO" show HEAD:fixtures/lab-switch-pt/FIXTURE.md > "$fixture/FIXTURE.md" 2>/dev/null || true
    say "switch-pt's capture saved as $fixture/capture.tar.gz (check its FIXTURE.md)"
fi
if [ ${#failed[@]} -gt 0 ]; then
    say "${#failed[@]} of ${#scenarios[@]} scenarios failed: ${failed[*]}"
    exit 1
fi
if [ ${#comparator_failed[@]} -gt 0 ]; then
    say "all ${#scenarios[@]} scenarios passed; comparator failed (its ratio not evaluated) in: ${comparator_failed[*]}"
else
    say "all ${#scenarios[@]} scenarios passed"
fi
