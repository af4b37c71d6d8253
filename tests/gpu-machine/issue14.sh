#!/usr/bin/env bash
# Issue 14 on a GPU machine (any number of GPUs; the device tool's machines have no RDMA NIC):
#  - the verdicts: `gdr-test` and `check` on a node without an RDMA device exit 1, naming why;
#  - the GPU libraries: which children gdrdoctor starts (a wrapper logs every child it runs):
#    one `gpu-worker` per GPU and one NVML child for `check`, none at all with --no-gpu-probe;
#    CUDA_VISIBLE_DEVICES naming a subset is reported and not inherited; a --deadline that cuts
#    the probe short is unknown, never a pass;
#  - timings (bench/gpu.sh), interleaved, 10 runs each: check, the CUDA floor (a program that
#    only starts CUDA with a 2 MiB allocation on every GPU), the whole-node probe alone
#    (`probe-gpu`), check --no-gpu-probe, check --no-gpu-probe --no-gdr-test, nvidia-smi topo -m;
#    and, when given, an older binary, so that before and after are measured in one run.
# Prints PASS/FAIL per claim and exits non-zero if one fails. Output under $OUT.
# Usage: issue14.sh [BINARY [OLD_BINARY]]
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:-target/release/gdrdoctor}")
old=${2:-}
out=${OUT:-/tmp/gdrdoctor-issue14}
mkdir -p "$out"
failed=0
claim() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=$((failed + 1)); fi; }

echo "== machine"
uname -r
nvidia-smi -L
nvidia-smi --query-gpu=pci.bus_id,driver_version,persistence_mode --format=csv
ls /sys/class/infiniband 2>/dev/null | head -n 3 || true
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
echo "GPUs: $ngpu; NEEDED: $(readelf -d "$bin" | awk '/NEEDED/ {print $5}' | tr '\n' ' ')"

echo "== the verdicts on a node without an RDMA device"
"$bin" gdr-test --color never > "$out/gdr-test.txt"; rc=$?
tail -n 1 "$out/gdr-test.txt"; echo "gdr-test exit $rc"
claim "$([ $rc = 1 ] && echo 0 || echo 1)" "gdr-test without a testable pair exits 1 (was 0, READY)"
"$bin" gdr-test --format reason; echo "exit $?"
"$bin" check --color never > "$out/check.txt"; rc=$?
tail -n 1 "$out/check.txt"; echo "check exit $rc"
"$bin" check --format json > "$out/check.json"
"$bin" check --select gpu,peer-memory --color never | tail -n 1; echo "exit ${PIPESTATUS[0]}"

echo "== which children run (GDRDOCTOR_PROBE_EXE: a wrapper that logs each and runs gdrdoctor)"
wrap="$out/wrap.sh"
printf '#!/bin/sh\necho "$1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}" >> %s/children.log\nexec %s "$@"\n' "$out" "$bin" > "$wrap"
chmod +x "$wrap"
children() { : > "$out/children.log"; GDRDOCTOR_PROBE_EXE="$wrap" "$bin" "$@" > /dev/null; cat "$out/children.log"; }
c=$(children check --format json); echo "$c"
claim "$([ "$(grep -c '^gpu-worker' <<<"$c")" = "$ngpu" ] && echo 0 || echo 1)" "check: one gpu-worker per GPU ($ngpu)"
claim "$([ "$(grep -c '^probe-gpu' <<<"$c")" = 1 ] && echo 0 || echo 1)" "check: one NVML child"
claim "$(grep -q '^gdr-pair' <<<"$c" && echo 1 || echo 0)" "check: no gdr-pair child (no NIC to pair with: no write-test work)"
claim "$(grep '^gpu-worker' <<<"$c" | grep -q 'CUDA_VISIBLE_DEVICES=GPU-' && echo 0 || echo 1)" "each worker sees its own GPU alone (CUDA_VISIBLE_DEVICES=GPU-<uuid>)"
c=$(children check --no-gpu-probe --format json); echo "--no-gpu-probe: [${c}]"
claim "$([ -z "$c" ] && echo 0 || echo 1)" "check --no-gpu-probe starts no GPU child (no GPU library loaded anywhere)"
c=$(children gdr-test --format json); echo "gdr-test: [${c}]"
claim "$([ -z "$c" ] && echo 0 || echo 1)" "gdr-test without a NIC starts no GPU work"
c=$(CUDA_VISIBLE_DEVICES=0 children check --format json); echo "$c"
CUDA_VISIBLE_DEVICES=0 "$bin" check --format json > "$out/cvd.json"
python3 - "$out/cvd.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rt = r["inventory"]["gpu_runtime"]
cuda = rt.get("cuda", {})
print("cleared_env:", rt.get("cleared_env"), "; CUDA devices:", [d.get("bus_id") for d in cuda.get("devices", [])])
PY
claim "$(grep '^gpu-worker' <<<"$c" | grep -q 'CUDA_VISIBLE_DEVICES=0' && echo 1 || echo 0)" "CUDA_VISIBLE_DEVICES=0 is not inherited by the workers"

echo "== --deadline cuts the probe short: unknown, never pass"
for d in 0.35 0.6; do
  start=$(date +%s%N)
  "$bin" --deadline "$d" check --format json > "$out/deadline-$d.json"; rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  python3 - "$out/deadline-$d.json" "$d" "$rc" "$ms" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
gpu = next(c for c in r["checks"] if c["id"] == "gpu")
print(f"--deadline {sys.argv[2]}: exit {sys.argv[3]}, {sys.argv[4]} ms, gpu {gpu['status']}:",
      [(f["code"], f["status"]) for f in gpu["findings"]][:3])
PY
done

echo "== timings: 10 interleaved runs each (after one warm-up of each), against the CUDA floor (bench/gpu.sh)"
bash bench/gpu.sh "$bin" $old > "$out/timings.txt" 2>&1
cat "$out/timings.txt"
claim "$(grep -q '^RATIOS ok' "$out/timings.txt" && echo 0 || echo 1)" "check within 1.10x of the CUDA floor run one process per GPU, 1.20x of the one-process floor and of probe-gpu; check --no-gpu-probe within 1.2x of --no-gdr-test"

echo
echo "$failed claim(s) failed"
exit "$failed"
