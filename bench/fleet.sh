#!/usr/bin/env bash
# Benchmark: `gdrdoctor fleet` over N generated .tar.gz captures of an 8-GPU / 8-NIC node
# (fixtures/fleet's eight nodes, captured with `gdrdoctor capture`, then repeated as hard links
# up to N files). Prints wall time and peak RSS for N and for N/10, to show memory does not grow
# with the number of captures. Target (BENCHMARKS.md): 10,000 captures in under 60 s on the
# 2-core development machine.
#
#   bench/fleet.sh [N]     # default 10000
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
bin=target/release/gdrdoctor
out=bench/out/fleet
cargo build --release --locked -q
rm -rf "$out"; mkdir -p "$out/seed" "$out/all" "$out/tenth"
for node in fixtures/fleet/node0*; do
  "$bin" --root "$node" capture "$out/seed/$(basename "$node").tar.gz" 2> /dev/null
done
seeds=("$out"/seed/*.tar.gz)
echo "seed captures: ${#seeds[@]} ($(du -ch "${seeds[@]}" | tail -n 1 | cut -f1) in all)"
for i in $(seq -w 1 "$n"); do
  s=${seeds[$((10#$i % ${#seeds[@]}))]}
  ln "$s" "$out/all/node$i.tar.gz"
  [ $((10#$i % 10)) -eq 0 ] && ln "$s" "$out/tenth/node$i.tar.gz"
done
run() { # DIR LABEL
  local t0 t1
  /usr/bin/time -f "%e %M" -o "$out/time.txt" "$bin" fleet "$1" --format json > "$out/fleet.json" || true
  read -r secs kib < <(tail -n 1 "$out/time.txt")
  python3 - "$out/fleet.json" "$2" "$secs" "$kib" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); label, secs, kib = sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
s = r["summary"]
print(f"{label}: {s['captures']} captures in {secs:.1f} s ({s['captures']/secs:.0f}/s), peak RSS {kib/1024:.1f} MiB; "
      f"{s['ready']} ready, {s['unreadable']} unreadable, {len(r['cross'])} cross-node findings")
PY
}
echo "cpus: $(nproc)"
run "$out/tenth" "N/10"
run "$out/all" "N"
