#!/usr/bin/env bash
# Issue 6 on a GPU machine without an RDMA NIC: the GDR write test's CUDA side runs for real
# (allocation on the GPU picked by bus id, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dma-buf export),
# and every GPU is reported as "no RDMA device on this node". Prints PASS/FAIL per claim.
# Usage: gdr-test.sh [BINARY]; output under $OUT (or /tmp/gdrdoctor-gpu).
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/gdrdoctor}
out=${OUT:-/tmp/gdrdoctor-gpu}
mkdir -p "$out"
echo "== gdrdoctor gdr-test -v"
/usr/bin/time -f "wall %e s" "$bin" gdr-test -v --color never 2>"$out/gdr-test.time" | tee "$out/gdr-test.txt"
echo "exit ${PIPESTATUS[0]}; $(cat "$out/gdr-test.time")"
"$bin" gdr-test --format json > "$out/gdr-test.json"
echo "== gdrdoctor gdr-test --memory host (no NIC: nothing to test)"
"$bin" gdr-test --memory host --color never | tail -n 4
echo "== gdrdoctor check: the gdr-test check"
"$bin" check --format json > "$out/check-gdr.json"
/usr/bin/time -f "check wall %e s" "$bin" check --color never --select gdr-test 2>&1 | tail -n 6
echo "== claims"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
r = json.load(open(f"{out}/gdr-test.json"))
failed = 0
def claim(ok, text):
    global failed
    print(("PASS " if ok else "FAIL ") + text)
    failed += not ok
gpus = sorted(g["bdf"] for g in r["inventory"]["gpus"] if g["vendor"] == "nvidia")
pairs = r["inventory"]["gdr_test"] or []
claim(sorted(p["gpu"] for p in pairs) == gpus, f"one pair per GPU: {[p['gpu'] for p in pairs]} == {gpus}")
for p in pairs:
    res = p["result"] or {}
    steps = res.get("memory_steps", [])
    f = res.get("failure") or {}
    claim(any(s.startswith("cuInit") for s in steps), f"{p['gpu']}: {steps[0] if steps else 'no steps'}")
    claim(any("GPU_DIRECT_RDMA_SUPPORTED=1, DMA_BUF_SUPPORTED=1" in s for s in steps), f"{p['gpu']}: attributes read")
    claim(any(s.startswith("cuMemAlloc") and "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set" in s for s in steps), f"{p['gpu']}: {next((s for s in steps if s.startswith('cuMemAlloc')), 'no cuMemAlloc')}")
    claim(any(s.startswith("dma-buf exported (") and "dmabuf" in s for s in steps), f"{p['gpu']}: {next((s for s in steps if 'dma-buf' in s), 'no export')}")
    claim(f.get("kind") == "no-rdma-device" and "no RDMA device on this node" in f.get("message", ""), f"{p['gpu']}: {f.get('kind')}: {f.get('message')}")
check = json.load(open(f"{out}/check-gdr.json"))
g = next(c for c in check["checks"] if c["id"] == "gdr-test")
codes = sorted({(x["code"], x["status"]) for x in g["findings"]})
claim(codes == [("gdr-test-no-rdma-device", "skip")] and len(g["findings"]) == len(gpus),
      f"check: gdr-test {g['status']} {codes} x{len(g['findings'])}")
print(f"{failed} claim(s) failed")
sys.exit(1 if failed else 0)
PY
