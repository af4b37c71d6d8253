#!/usr/bin/env bash
# Live `gdrdoctor check` against the CUDA floor, on a GPU machine, in one run (issue 24).
#
# The floor (bench/cuda-floor.c) is the least a tool that proves every GPU usable pays: start
# CUDA and make a context with a 2 MiB allocation on every GPU, in one process and as one
# process per GPU (as gdrdoctor's workers run). Each command runs RUNS times (default 10),
# interleaved, after one warm-up each; the wall time of the whole process is measured (Python
# perf_counter), output discarded. Then one `check` with GDRDOCTOR_TRACE=1 shows where its time
# went. The last line is `RATIOS ok` when check is within 1.05x of the floor run one process per
# GPU (as gdrdoctor runs it; issue 43), within 1.20x of the one-process floor and of gdrdoctor's
# own whole-node probe (`probe-gpu`, one process), --no-gpu-probe within 1.2x of --no-gdr-test
# and at most 0.30x of `nvidia-smi topo -m` (issue 43), and, with COLD_RUNS=N, check within 1.05x
# of the per-GPU floor when each run finds the GPUs idle for COLD_IDLE seconds (default 15).
# Usage: [RUNS=10] [COLD_RUNS=0] bench/gpu.sh [BINARY [OLD_BINARY]]
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/gdrdoctor}")
old=${2:-}
floor=$(mktemp -d)/cuda-floor
cc -O2 -o "$floor" bench/cuda-floor.c -ldl || { echo "bench/gpu.sh: cannot build the CUDA floor" >&2; exit 2; }
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
"$floor" && CUDA_FLOOR_GPUS=$ngpu "$floor" --parallel || { echo "bench/gpu.sh: the CUDA floor failed" >&2; exit 2; }
CUDA_FLOOR_GPUS=$ngpu RUNS=${RUNS:-10} python3 - "$bin" "$old" "$floor" <<'PY'
import os, statistics, subprocess, sys, time
new, old, floor = sys.argv[1:4]
cmds = {
    "check": [new, "check", "--format", "json"],
    "CUDA floor, one process": [floor],
    "CUDA floor, one process per GPU": [floor, "--parallel"],
    "probe-gpu (whole-node probe alone)": [new, "probe-gpu", "--nvml", "--cuda", "--hip", "--export"],
    "check --no-gpu-probe": [new, "check", "--no-gpu-probe", "--format", "json"],
    "check --no-gpu-probe --no-gdr-test": [new, "check", "--no-gpu-probe", "--no-gdr-test", "--format", "json"],
    "nvidia-smi topo -m": ["nvidia-smi", "topo", "-m"],
}
if old:
    cmds["old: check"] = [old, "check", "--format", "json"]
    cmds["old: check --no-gpu-probe"] = [old, "check", "--no-gpu-probe", "--format", "json"]
    cmds["old: probe-gpu"] = [old, "probe-gpu", "--nvml", "--cuda", "--hip", "--export"]
times = {k: [] for k in cmds}
def run(argv):
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000
for argv in cmds.values():
    run(argv)
for _ in range(int(os.environ["RUNS"])):
    for k, argv in cmds.items():
        times[k].append(run(argv))
med = {k: statistics.median(v) for k, v in times.items()}
for k, v in times.items():
    print(f"{k:<40} median {med[k]:7.1f} ms  (min {min(v):7.1f}, max {max(v):7.1f})")
# Two floors. One process per GPU is how gdrdoctor must run CUDA (a GPU that hangs its driver or
# crashes a library costs only its own results: src/gpu/worker.rs), so that floor is the target
# (1.10x). One process for every GPU is cheaper still (the driver's per-process start and
# teardown are paid once): on 4 H100s 80-130 ms less, which is the price of that isolation; the
# ratio to it is held at 1.20x and printed beside.
per_gpu = med["CUDA floor, one process per GPU"]
one = med["CUDA floor, one process"]
r0 = med["check"] / per_gpu
r0b = med["check"] / one
r1 = med["check"] / med["probe-gpu (whole-node probe alone)"]
r2 = med["check --no-gpu-probe"] / med["check --no-gpu-probe --no-gdr-test"]
r3 = med["check"] / med["nvidia-smi topo -m"]
print(f"ratio check / CUDA floor, one process per GPU           {r0:.3f} (target <= 1.05)")
print(f"ratio check / CUDA floor, one process                   {r0b:.3f} (target <= 1.20)")
print(f"ratio check / probe-gpu (one process)                   {r1:.3f} (target <= 1.20)")
print(f"ratio check --no-gpu-probe / ... --no-gdr-test            {r2:.3f} (target <= 1.2)")
print(f"ratio check / nvidia-smi topo -m                          {r3:.2f}")
# Issue 43: the static part against the tool an operator would run instead.
r4 = med["check --no-gpu-probe"] / med["nvidia-smi topo -m"]
print(f"ratio check --no-gpu-probe / nvidia-smi topo -m           {r4:.3f} (target <= 0.30)")
# Cold: the GPUs idle for COLD_IDLE seconds (default 15) before each run, as a prolog finds them
# between jobs; COLD_RUNS pairs of check and the per-GPU floor, in turn (default 0: skipped).
cold_runs = int(os.environ.get("COLD_RUNS", "0"))
r5 = None
if cold_runs:
    idle = float(os.environ.get("COLD_IDLE", "15"))
    cold = {"check": [], "CUDA floor, one process per GPU": []}
    for _ in range(cold_runs):
        for k in cold:
            time.sleep(idle)
            cold[k].append(run(cmds[k]))
    for k, v in cold.items():
        print(f"cold: {k:<34} median {statistics.median(v):7.1f} ms  (min {min(v):7.1f}, max {max(v):7.1f})")
    r5 = statistics.median(cold["check"]) / statistics.median(cold["CUDA floor, one process per GPU"])
    print(f"ratio cold check / CUDA floor, one process per GPU      {r5:.3f} (target <= 1.05)")
if old:
    print(f"old binary: check {med['old: check']:.1f} ms, check / CUDA floor per GPU {med['old: check'] / per_gpu:.3f}")
    print(f"old binary: check --no-gpu-probe {med['old: check --no-gpu-probe']:.1f} ms, / nvidia-smi topo -m {med['old: check --no-gpu-probe'] / med['nvidia-smi topo -m']:.3f}")
print("== one check, traced (GDRDOCTOR_TRACE=1)")
p = subprocess.run([new, "check", "--format", "json"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   text=True, env=dict(os.environ, GDRDOCTOR_TRACE="1"))
print(p.stderr.rstrip())
ok = r0 <= 1.05 and r0b <= 1.20 and r1 <= 1.20 and r2 <= 1.2 and r4 <= 0.30 and (r5 is None or r5 <= 1.05)
print("RATIOS", "ok" if ok else "MISSED")
PY
