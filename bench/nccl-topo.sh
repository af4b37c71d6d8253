#!/usr/bin/env bash
# Benchmark (issue 16): a static `check` on the large root (fixtures/synth/synth.py --large, 16
# NICs) with and without an NCCL topology file naming its 16 NICs (and /etc/nccl.conf naming
# the file), for a build before and after. BENCHMARKS.md, "NCCL's view (issue 16)", has the
# numbers. The target: within 1.1x of the build before on the same root.
#
#   OLD=/path/to/old/gdrdoctor NEW=/path/to/new/gdrdoctor bench/nccl-topo.sh [GPUS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
gpus=${1:-5000}
runs=${2:-5}
out=bench/out/nccl-topo
mkdir -p "$out"
root=$out/root-$gpus
if [ ! -f "$root/FIXTURE.md" ]; then
  rm -rf "$root" "$root-topo"
  python3 fixtures/synth/synth.py --large "$root" --gpus "$gpus" --nics 16
  cp -a "$root" "$root-topo"
  # A topology file in NCCL's dump format: each NIC under a cpu by its bus ID, with its net.
  python3 - "$root-topo" <<'PY'
import os, sys
root = sys.argv[1]
ib = os.path.join(root, "sys/class/infiniband")
lines = ['<system version="1">']
for cpu in (0, 1):
    lines.append(f'  <cpu numaid="{cpu}" arch="x86_64" vendor="GenuineIntel">')
    for name in sorted(os.listdir(ib)):
        dev = os.path.realpath(os.path.join(ib, name, "device"))
        numa = open(os.path.join(dev, "numa_node")).read().strip()
        if numa != str(cpu):
            continue
        busid = os.path.basename(dev)
        lines.append(f'    <pci busid="{busid}" class="0x020000" link_speed="32.0 GT/s PCIe" link_width="16">')
        lines.append(f'      <nic><net name="{name}" dev="0" port="1" gdr="1"/></nic>')
        lines.append('    </pci>')
    lines.append('  </cpu>')
lines.append('</system>')
os.makedirs(os.path.join(root, "etc"), exist_ok=True)
open(os.path.join(root, "etc/topo.xml"), "w").write("\n".join(lines) + "\n")
open(os.path.join(root, "etc/nccl.conf"), "w").write("NCCL_TOPO_FILE=/etc/topo.xml\n")
PY
fi
median() { # BIN ROOT: the median wall time of RUNS static checks
  local bin=$1 r=$2 t=()
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e" -o "$out/time.txt" "$bin" --root "$r" check --format json > /dev/null 2>&1 || true
    t+=("$(tail -n 1 "$out/time.txt")")
  done
  printf '%s\n' "${t[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p"
}
echo "cpus: $(nproc); root: $root ($gpus GPUs, 16 NICs); median of $runs"
echo "| build | no topology file | 16-NIC topology file |"
echo "|---|---|---|"
for b in OLD NEW; do
  bin=${!b}
  printf '| %s | %s s | %s s |\n' "$b" "$(median "$bin" "$root")" "$(median "$bin" "$root-topo")"
done
