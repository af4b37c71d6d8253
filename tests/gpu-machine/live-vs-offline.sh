#!/usr/bin/env bash
# On a GPU machine (the device tool's): runs the release binary live, captures the sysfs subset it
# reads, runs it again on the capture, and compares the two reports. Output under $OUT (or
# /tmp/gdrdoctor-gpu). Usage: tests/gpu-machine/live-vs-offline.sh [BINARY]
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/gdrdoctor}
out=${OUT:-/tmp/gdrdoctor-gpu}
mkdir -p "$out"
echo "== machine"; uname -r; nvidia-smi -L 2>&1 | head; readelf -d "$bin" | grep NEEDED
echo "== live check (root; the GPU libraries are not asked, as offline they cannot be)"
"$bin" check -v --color never --no-gpu-probe | tee "$out/live.txt"; echo "exit ${PIPESTATUS[0]}"
"$bin" check --format json --no-gpu-probe > "$out/live.json"
echo "== live check (unprivileged: nobody)"
setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" check --color never | tail -n 4
echo "== capture and offline check"
rm -rf "$out/capture" && python3 tests/gpu-machine/minicapture.py "$out/capture"
"$bin" --root "$out/capture" check -v --color never > "$out/offline.txt"; echo "offline exit $?"
"$bin" --root "$out/capture" check --format json > "$out/offline.json"
tar czf "$out/capture.tgz" -C "$out" capture
python3 - "$out/live.json" "$out/offline.json" <<'PY'
import json, sys
live, off = (json.load(open(p)) for p in sys.argv[1:3])
# Why the GPU libraries were not asked differs (--no-gpu-probe live, a captured root offline);
# everything else must be equal.
REASONS = ["--no-gpu-probe", "a captured root, whose GPUs are elsewhere"]
def norm(r):
    r = dict(r); r.pop("root"); r.pop("verdict"); r.pop("counts")
    r["checks"] = [c for c in r["checks"] if c["id"] not in ("rdma-access", "gdr-test")]
    r["inventory"] = dict(r["inventory"]); r["inventory"].pop("gpu_runtime"); r["inventory"].pop("gdr_test", None)
    text = json.dumps(r)
    for reason in REASONS:
        text = text.replace(reason, "<not asked>")
    return json.loads(text)
a, b = norm(live), norm(off)
if a == b:
    print("live == offline (all checks but the live-only rdma-access and gdr-test, and the inventory)")
else:
    for k in a:
        if a[k] != b.get(k):
            print("DIFFERS:", k); print(" live:   ", json.dumps(a[k])[:2000]); print(" offline:", json.dumps(b.get(k))[:2000])
    sys.exit(1)
PY
