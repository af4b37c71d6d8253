#!/usr/bin/env bash
# Issue 19 on a GPU machine with any number of GPUs (written for 2, 4 and 8; runs on 1):
#  - `gdrdoctor topo` against `nvidia-smi topo -m`: the same GPU x GPU matrix (NV# between every
#    pair), the same CPU and NUMA affinity per GPU;
#  - `check -v` with the GPU probe: every GPU seen by NVML and CUDA, a dma-buf exported from each,
#    the verdict; `capture` and the offline report on the capture, equal but for the live-only
#    parts (the capture holds NVML's answer: NV# cells and NVML's GPU findings included);
#  - NVML's facts (persistence, NVLinks, fabric) against nvidia-smi: nvml-facts.sh;
#  - `nccl verify` over all GPUs (NET forced, NCCL_NVLS_ENABLE=0), when the binary has it;
#  - the timings and the faults that scale with the GPUs (one worker per GPU, CUDA_VISIBLE_DEVICES
#    naming a subset): issue14.sh, run from here, whose timings (bench/gpu.sh) measure `check`
#    against the CUDA floor in the same run;
#  - --deadline at 8 points from just after the node is read to past a whole check (issue 24):
#    a report every time, exit 1 and never 2, no GPU passes whose worker did not answer, no
#    message blames sysfs, and the report comes within the deadline and 250 ms.
# Prints PASS/FAIL per claim and exits non-zero if one fails. Output under $OUT.
# Usage: several-gpus.sh [BINARY]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
bin=$(realpath "${1:-target/release/gdrdoctor}")
out=${OUT:-/tmp/gdrdoctor-several}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
failed=0
claim() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=$((failed + 1)); fi; }

echo "== machine"
uname -r
nvidia-smi -L
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
echo "GPUs: $ngpu"

echo "== topo against nvidia-smi topo -m"
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
"$bin" topo --color never > "$out/topo.txt"; echo "topo exit $?"
"$bin" topo --format json > "$out/topo.json"
cat "$out/nvidia-smi-topo.txt" "$out/topo.txt"
python3 - "$out/nvidia-smi-topo.txt" "$out/topo.txt" "$ngpu" > "$out/topo-compare.txt" <<'PY'
import re, sys
def table(path):
    """GPU rows of a `topo -m` matrix: {row: {column: cell}}, ANSI underlining removed."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(path).read())
    lines = text.splitlines()
    head = [h.strip() for h in lines[0].split("\t")]
    rows = {}
    for line in lines[1:]:
        if not line.strip():
            break
        cells = [c.strip() for c in line.split("\t")]
        if cells[0].startswith("GPU"):
            rows[cells[0]] = dict(zip(head[1:], cells[1:]))
    return rows
smi, ours, n = table(sys.argv[1]), table(sys.argv[2]), int(sys.argv[3])
gpus = [f"GPU{i}" for i in range(n)]
bad = 0
for r in gpus:
    for c in gpus + ["CPU Affinity", "NUMA Affinity"]:
        a, b = smi.get(r, {}).get(c), ours.get(r, {}).get(c)
        same = a == b
        print(f"{r:>5} {c:<14} nvidia-smi {a!s:<12} gdrdoctor {b!s:<12} {'same' if same else 'DIFFERS'}")
        bad += not same
print("TOPO", "same" if bad == 0 and len(smi) == n else f"{bad} cells differ")
PY
cat "$out/topo-compare.txt"
claim "$(grep -q '^TOPO same' "$out/topo-compare.txt" && echo 0 || echo 1)" \
  "topo: every GPU x GPU cell, CPU and NUMA affinity as nvidia-smi topo -m shows them ($ngpu GPUs)"

echo "== check -v with the GPU probe"
start=$(date +%s%N)
"$bin" check -v --color never > "$out/check-v.txt"; rc=$?
echo "check -v exit $rc, $(( ($(date +%s%N) - start) / 1000000 )) ms"
tail -n 3 "$out/check-v.txt"
"$bin" check --format json > "$out/check.json"
python3 - "$out/check.json" "$ngpu" > "$out/probe.txt" <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
rt = r["inventory"]["gpu_runtime"]
nvml = [d["bus_id"] for d in rt.get("nvml", {}).get("devices", [])]
cuda = rt.get("cuda", {}).get("devices", [])
exported = [d["bus_id"] for d in cuda if (d.get("export") or {}).get("result") == "exported"]
print("NVML devices:", nvml)
print("CUDA devices:", [d["bus_id"] for d in cuda], "exported:", exported)
print("verdict:", r["verdict"])
gpu = next(c for c in r["checks"] if c["id"] == "gpu")
print("gpu check:", gpu["status"], [(f["code"], f["status"]) for f in gpu["findings"]][:8])
print("PROBE", "all" if len(nvml) == n and len(cuda) == n and len(exported) == n else "MISSING")
PY
cat "$out/probe.txt"
claim "$(grep -q '^PROBE all' "$out/probe.txt" && echo 0 || echo 1)" \
  "every GPU probed by NVML and CUDA and a dma-buf exported from each ($ngpu)"

echo "== capture, and the offline report on it"
rm -rf "$out/capture.tar.gz"
"$bin" capture "$out/capture.tar.gz"; echo "capture exit $?"
"$bin" check --format json > "$out/live.json"
"$bin" --root "$out/capture.tar.gz" check --format json > "$out/offline.json"
"$bin" --root "$out/capture.tar.gz" topo > "$out/offline-topo.txt"
# The full JSON comparison is live-vs-offline.sh's; here the claim is on the check statuses and
# on the GPU findings that NVML decides (the capture records NVML's answer since issue 24; CUDA's
# export is live only, so the gpu check's CUDA facts are not compared).
python3 - "$out/live.json" "$out/offline.json" > "$out/offline-compare.txt" <<'PY'
import json, sys
live, off = (json.load(open(p)) for p in sys.argv[1:3])
skip = ("rdma-access", "gdr-test")
a = [(c["id"], c["status"]) for c in live["checks"] if c["id"] not in skip]
b = [(c["id"], c["status"]) for c in off["checks"] if c["id"] not in skip]
nvml_codes = ("gpu-persistence-off", "gpu-nvlink-down", "gpu-fabric-not-ready")
def gpu(r):
    g = next(c for c in r["checks"] if c["id"] == "gpu")
    return sorted((f["code"], f["status"], f["subject"]) for f in g["findings"] if f["code"] in nvml_codes or f["code"] == "gpu-ready")
print("live:   ", a); print("offline:", b)
print("gpu live:   ", gpu(live)); print("gpu offline:", gpu(off))
print("OFFLINE", "same" if a == b and gpu(live) == gpu(off) else "DIFFERS")
PY
cat "$out/offline-compare.txt"
# The whole matrix, NV# cells included (from the recorded NVML answer), and the affinity columns.
head -n "$((ngpu + 1))" "$out/topo.txt" > "$out/matrix-live.txt"
head -n "$((ngpu + 1))" "$out/offline-topo.txt" > "$out/matrix-offline.txt"
claim "$(grep -q '^OFFLINE same' "$out/offline-compare.txt" && cmp -s "$out/matrix-live.txt" "$out/matrix-offline.txt" && echo 0 || echo 1)" \
  "offline on the capture: the same check statuses, NVML's GPU findings and topo matrix (NV# cells too) as live"

echo "== NVML's facts against nvidia-smi, live and from a capture (nvml-facts.sh)"
OUT="$out/nvml" bash tests/gpu-machine/nvml-facts.sh "$bin" > "$out/nvml-facts.log" 2>&1; rc=$?
grep -E '^(PASS|FAIL)' "$out/nvml-facts.log"
claim "$rc" "nvml-facts.sh on $ngpu GPUs (its claims above)"

echo "== nccl verify over all GPUs"
if "$bin" nccl verify --help > /dev/null 2>&1; then
  start=$(date +%s%N)
  "$bin" nccl verify --color never > "$out/nccl-verify.txt" 2>&1; rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  cat "$out/nccl-verify.txt"; echo "nccl verify exit $rc, $ms ms"
  "$bin" nccl verify --format json > "$out/nccl-verify.json" 2> "$out/nccl-verify.stderr"
  python3 - "$out/nccl-verify.json" "$ngpu" > "$out/nccl-verify-claims.txt" <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
text = json.dumps(r)
print("keys:", sorted(r)[:20])
ran = r.get("ranks") or r.get("nranks") or r.get("run", {}).get("ranks")
print("ranks:", ran)
# With two GPUs or more NCCL carries an all-reduce over NET, and the sum is checked.
if n >= 2:
    print("ALLREDUCE", "checked" if "sum" in text and ("\"ok\"" in text or "true" in text) else "NOT SEEN")
else:
    print("ALLREDUCE", "n/a (one GPU: a one-rank communicator)")
PY
  cat "$out/nccl-verify-claims.txt"
  claim "$(grep -qi 'socket\|gdr' "$out/nccl-verify.txt" && echo 0 || echo 1)" "nccl verify names the transport NCCL chose"
  if [ "$ngpu" -ge 2 ]; then
    claim "$(grep -q '^ALLREDUCE checked' "$out/nccl-verify-claims.txt" && echo 0 || echo 1)" "nccl verify: all-reduce over NET across $ngpu GPUs, sum checked"
  fi
else
  echo "this binary has no \`nccl verify\`"
fi

echo "== timings, children, CUDA_VISIBLE_DEVICES subset, --deadline part way (issue14.sh)"
OUT="$out/issue14" bash tests/gpu-machine/issue14.sh "$bin" > "$out/issue14.log" 2>&1; rc=$?
grep -E '^(PASS|FAIL)|median|ratio|--deadline' "$out/issue14.log"
claim "$rc" "issue14.sh on $ngpu GPUs (its claims above)"
echo "== --deadline spread over the probe's duration: always a report, no GPU passes that the probe did not reach"
# From just after the node is read (twice the time of check --no-gpu-probe) to past a whole
# check, in 8 steps; each run is judged on its own (issue 24).
python3 - "$bin" "$out" > "$out/deadline-claims.txt" <<'PY'
import json, re, statistics, subprocess, sys, time
bin, out = sys.argv[1:3]
def timed(argv):
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    return time.perf_counter() - t, p
whole = statistics.median(timed([bin, "check", "--format", "json"])[0] for _ in range(3))
read = statistics.median(timed([bin, "check", "--no-gpu-probe", "--format", "json"])[0] for _ in range(3))
print(f"a whole check takes {whole * 1000:.0f} ms here, one without the probe {read * 1000:.0f} ms")
lo = 2 * read
bad = 0
for k in range(8):
    d = round(lo + (whole * 1.3 - lo) * k / 7, 3)
    took, p = timed([bin, "--deadline", str(d), "check", "--format", "json"])
    open(f"{out}/deadline-{d}.json", "w").write(p.stdout)
    problems = []
    if p.returncode != 1:
        problems.append(f"exit {p.returncode} (wanted 1: not ready, never 2)")
    try:
        r = json.loads(p.stdout)
    except ValueError:
        print(f"FAIL --deadline {d}: no report; exit {p.returncode}; {p.stderr.strip()[:300]}")
        bad += 1
        continue
    rt = r["inventory"]["gpu_runtime"]
    answered = {d_["bus_id"].lower() for d_ in (rt.get("cuda") or {}).get("devices", []) if d_.get("bus_id")}
    gpu = next(c for c in r["checks"] if c["id"] == "gpu")
    passed, unknown = [], []
    for f in gpu["findings"]:
        m = re.search(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", f["subject"].lower())
        if not m:
            continue
        (passed if f["status"] == "pass" else unknown).append(m.group(0))
        if f["status"] == "pass" and m.group(0) not in answered:
            problems.append(f"{m.group(0)} passes but its worker did not answer")
        if f["status"] == "unknown" and "sysfs" in f["message"]:
            problems.append(f"{m.group(0)}: the message blames sysfs: {f['message'][:120]}")
    if took > d + 0.25:
        problems.append(f"took {took * 1000:.0f} ms, more than the deadline and 250 ms")
    msgs = sorted({f["message"][:150] for f in gpu["findings"] if f["status"] == "unknown"})
    print(f"{'FAIL' if problems else 'PASS'} --deadline {d}: {took * 1000:.0f} ms, exit {p.returncode}, "
          f"{len(passed)} GPU(s) pass, {len(unknown)} unknown {'; '.join(problems)}")
    for m in msgs[:2]:
        print(f"     {m}")
    bad += bool(problems)
print("DEADLINES", "ok" if bad == 0 else f"{bad} failed")
PY
cat "$out/deadline-claims.txt"
claim "$(grep -q '^DEADLINES ok' "$out/deadline-claims.txt" && echo 0 || echo 1)" \
  "--deadline at 8 points over the probe: a report every time, exit 1, no GPU passes that was not reached, within the deadline + 250 ms"

echo
echo "$failed claim(s) failed"
exit "$failed"
