#!/usr/bin/env bash
# Benchmark: static `gdrdoctor check` on a generated large root (8 GPUs, 8 dual-port NICs,
# 4 PCIe switches, ~300 PCI functions, 16 GID slots per port). Prints median wall time and peak
# RSS; the targets (BENCHMARKS.md) are < 20 ms and < 15 MB on the 2-core development machine.
#
#   bench/check.sh [RUNS]        # default 200 runs after 20 warm-up runs
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200}
root=bench/out/root
bin=target/release/gdrdoctor

cargo build --release --locked -q
if [ ! -f "$root/FIXTURE.md" ]; then
  rm -rf "$root"
  bench/mkroot.sh "$root"
fi
args=(--root "$root" check --format json)
"$bin" "${args[@]}" > bench/out/report.json || [ $? -eq 1 ]

if command -v hyperfine > /dev/null; then
  # hyperfine -N runs the binary without a shell: the closest to what a prolog pays.
  hyperfine -N --style none --warmup 20 --runs "$runs" --export-json bench/out/hyperfine.json "$bin ${args[*]}" > /dev/null
  python3 - <<'PY'
import json
r = json.load(open("bench/out/hyperfine.json"))["results"][0]
t = sorted(x * 1000 for x in r["times"])
q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
print(f"hyperfine, {len(t)} runs: median {r['median']*1000:.1f} ms, p10 {q(0.1):.1f}, p90 {q(0.9):.1f}, min {t[0]:.1f}, max {t[-1]:.1f}")
PY
else
  python3 - "$runs" "$bin" "${args[@]}" <<'PY'
import statistics, subprocess, sys, time
runs, cmd = int(sys.argv[1]), sys.argv[2:]
def once():
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)
    return (time.perf_counter() - t) * 1000
for _ in range(20):
    once()
t = sorted(once() for _ in range(runs))
q = lambda p: t[min(len(t) - 1, int(p * len(t)))]
print(f"python loop (no hyperfine; includes fork overhead), {runs} runs: median {statistics.median(t):.1f} ms, p10 {q(0.1):.1f}, p90 {q(0.9):.1f}, min {t[0]:.1f}, max {t[-1]:.1f}")
PY
fi
# Peak RSS from GNU time (Python's RUSAGE_CHILDREN would count its own forked pages).
peak=0
for _ in $(seq 20); do
  kb=$( { /usr/bin/time -f '%M' "$bin" "${args[@]}" > /dev/null; } 2>&1 | tail -n 1 )
  [ "$kb" -gt "$peak" ] && peak=$kb
done
echo "peak RSS: $((peak / 1024)).$(( (peak % 1024) * 10 / 1024 )) MB ($peak KB, max of 20 runs)"
echo "functions: $(ls "$root/sys/bus/pci/devices" | wc -l), GPUs: $(python3 -c 'import json;print(json.load(open("bench/out/report.json"))["node"]["gpus"])'), RDMA devices: $(ls "$root/sys/class/infiniband" | wc -l)"
