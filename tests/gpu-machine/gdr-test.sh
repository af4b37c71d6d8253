#!/usr/bin/env bash
# The GDR write test's GPU side on a GPU machine without an RDMA NIC (issues 6 and 14):
#  - `gdr-test` has no pair to test: it starts no GPU work, exits 1, and names rdma-link;
#  - with NICs named on the command line that the node lacks (`--nic fake0:1 --nic fake1:1`),
#    each GPU's pairs run in that GPU's one worker, for real: allocation on the GPU picked by bus
#    id, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, a dma-buf export per pair, the same cuInit for both
#    pairs, then libibverbs says the NIC is not there. A wrapper (GDRDOCTOR_PROBE_EXE) logs the
#    children: one gpu-worker per GPU, no gdr-pair.
# Prints PASS/FAIL per claim. Usage: gdr-test.sh [BINARY]; output under $OUT (or /tmp/gdrdoctor-gpu).
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:-target/release/gdrdoctor}")
out=${OUT:-/tmp/gdrdoctor-gpu}
mkdir -p "$out"
wrap="$out/wrap.sh"
printf '#!/bin/sh\necho "$1" >> %s/children.log\nexec %s "$@"\n' "$out" "$bin" > "$wrap"
chmod +x "$wrap"
echo "== gdrdoctor gdr-test (no NIC on this node)"
: > "$out/children.log"
GDRDOCTOR_PROBE_EXE="$wrap" "$bin" gdr-test --color never | tail -n 3
echo "exit ${PIPESTATUS[0]}; children: [$(tr '\n' ' ' < "$out/children.log")]"
"$bin" gdr-test --format json > "$out/gdr-test-none.json"
echo "== gdrdoctor gdr-test -v --nic fake0:1 --nic fake1:1 (NICs the node lacks)"
: > "$out/children.log"
GDRDOCTOR_PROBE_EXE="$wrap" /usr/bin/time -f "wall %e s" "$bin" gdr-test -v --color never --nic fake0:1 --nic fake1:1 2>"$out/gdr-test.time" | tee "$out/gdr-test.txt"
echo "exit ${PIPESTATUS[0]}; $(cat "$out/gdr-test.time"); children: [$(tr '\n' ' ' < "$out/children.log")]"
cp "$out/children.log" "$out/children-fake.log"
"$bin" gdr-test --format json --nic fake0:1 --nic fake1:1 > "$out/gdr-test.json"
echo "== claims"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
failed = 0
def claim(ok, text):
    global failed
    print(("PASS " if ok else "FAIL ") + text)
    failed += not ok
none = json.load(open(f"{out}/gdr-test-none.json"))
g = next(c for c in none["checks"] if c["id"] == "gdr-test")
link = next(c for c in none["checks"] if c["id"] == "rdma-link")
claim(none["verdict"]["exit_code"] == 1 and none["inventory"]["gdr_test"] == [],
      f"no NIC: no pair, exit {none['verdict']['exit_code']}: {none['verdict']['summary']}")
claim([f["code"] for f in g["findings"]] == ["gdr-test-no-rdma-device"] and link.get("prerequisite_of") == ["gdr-test"],
      f"no NIC: {[f['code'] for f in g['findings']]}, rdma-link {link['status']} as prerequisite of {link.get('prerequisite_of')}")
r = json.load(open(f"{out}/gdr-test.json"))
gpus = sorted(g["bdf"] for g in r["inventory"]["gpus"] if g["vendor"] == "nvidia")
pairs = r["inventory"]["gdr_test"] or []
claim(sorted(p["gpu"] for p in pairs) == sorted(gpus * 2), f"two pairs per GPU: {[(p['gpu'], p['nic']) for p in pairs]}")
children = open(f"{out}/children-fake.log").read().split()
claim(children.count("gpu-worker") == len(gpus) and "gdr-pair" not in children,
      f"one gpu-worker per GPU, no gdr-pair: {children}")
for gpu in gpus:
    mine = [p for p in pairs if p["gpu"] == gpu]
    inits = {next((s for s in (p["result"] or {}).get("memory_steps", []) if s.startswith("cuInit")), None) for p in mine}
    claim(len(inits) == 1 and None not in inits, f"{gpu}: both pairs on one CUDA start: {inits}")
for p in pairs:
    res = p["result"] or {}
    steps = res.get("memory_steps", [])
    f = res.get("failure") or {}
    tag = f"{p['gpu']} <-> {p['nic']}"
    claim(any("GPU_DIRECT_RDMA_SUPPORTED=1, DMA_BUF_SUPPORTED=1" in s for s in steps), f"{tag}: attributes read")
    claim(any(s.startswith("cuMemAlloc") and "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set" in s for s in steps), f"{tag}: {next((s for s in steps if s.startswith('cuMemAlloc')), 'no cuMemAlloc')}")
    claim(any(s.startswith("dma-buf exported (") and "dmabuf" in s for s in steps), f"{tag}: {next((s for s in steps if 'dma-buf' in s), 'no export')}")
    claim(f.get("kind") in ("provider-missing", "device-list") , f"{tag}: {f.get('kind')}: {f.get('message')}")
print(f"{failed} claim(s) failed")
sys.exit(1 if failed else 0)
PY
