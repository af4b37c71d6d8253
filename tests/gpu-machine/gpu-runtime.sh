#!/usr/bin/env bash
# Issue 5 on a GPU machine (the device tool's): the release binary asks NVML and CUDA, and this
# script checks what it says against nvidia-smi. Prints PASS/FAIL per claim and exits non-zero if
# any fails. Output under $OUT (or /tmp/gdrdoctor-gpu). Usage: gpu-runtime.sh [BINARY]
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/gdrdoctor}
out=${OUT:-/tmp/gdrdoctor-gpu}
mkdir -p "$out"
echo "== machine"
uname -r; nvidia-smi -L; nvidia-smi --query-gpu=pci.bus_id,driver_version,persistence_mode --format=csv
echo "NEEDED: $(readelf -d "$bin" | awk '/NEEDED/ {print $5}' | tr '\n' ' ')"
echo "== nvidia-smi topo -m"
nvidia-smi topo -m | tee "$out/nvidia-smi-topo.txt"
echo "== gdrdoctor topo"
"$bin" topo | tee "$out/topo.txt"
"$bin" topo --format json > "$out/topo.json"
echo "== gdrdoctor check -v"
/usr/bin/time -f "wall %e s, max RSS %M KiB" "$bin" check -v --color never 2>"$out/check.time" | tee "$out/check.txt"
echo "exit ${PIPESTATUS[0]}; $(cat "$out/check.time")"
"$bin" check --format json > "$out/check.json"
echo "== as nobody (no root)"
setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" check --color never --select gpu,peer-memory | tail -n 8
echo "== CUDA_VISIBLE_DEVICES=0 set (as in a Slurm prolog), and a deadline the probe cannot meet"
CUDA_VISIBLE_DEVICES=0 "$bin" check --format json > "$out/cvd.json"
printf 'timeouts: {gpu_probe_s: 0.05}\n' > "$out/short.yaml"
"$bin" --config "$out/short.yaml" check --format json > "$out/short.json"
"$bin" --config "$out/short.yaml" check --color never --select gpu | tail -n 4
echo "== claims"
python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
report = json.load(open(f"{out}/check.json"))
topo = json.load(open(f"{out}/topo.json"))
inv = report["inventory"]
rt = inv["gpu_runtime"]
failed = 0
def claim(ok, text):
    global failed
    print(("PASS " if ok else "FAIL ") + text)
    failed += not ok
def bdf(bus):
    dom, rest = bus.split(":", 1)
    return f"{int(dom, 16):04x}:{rest.lower()}"
sysfs = sorted(g["bdf"] for g in inv["gpus"] if g["vendor"] == "nvidia")
claim(rt["status"] == "probed", f"the GPU probe ran ({rt['status']})")
nvml = rt.get("nvml", {})
cuda = rt.get("cuda", {})
nv = sorted(bdf(d["bus_id"]) for d in nvml.get("devices", []) if d.get("bus_id"))
claim(nvml.get("status") == "ready" and nv == sysfs, f"NVML's GPUs {nv} match sysfs {sysfs} one for one")
cu = {bdf(d["bus_id"]): d for d in cuda.get("devices", []) if d.get("bus_id")}
claim(sorted(cu) == sysfs, f"CUDA's GPUs {sorted(cu)} match sysfs")
for b in sysfs:
    d = cu.get(b, {})
    e = d.get("export", {})
    claim(e.get("result") == "exported" and "dmabuf" in e.get("fd_target", ""),
          f"{b}: dma-buf export probe: {e}")
    claim(d.get("gdr_supported") is True and d.get("dmabuf_supported") is True,
          f"{b}: GPU_DIRECT_RDMA_SUPPORTED={d.get('gdr_supported')} DMA_BUF_SUPPORTED={d.get('dmabuf_supported')}")
    bar = next(g["bar1_bytes"] for g in inv["gpus"] if g["bdf"] == b)
    nd = next((x for x in nvml.get("devices", []) if x.get("bus_id") and bdf(x["bus_id"]) == b), {})
    claim(bar == nd.get("bar1_total"), f"{b}: BAR1 from sysfs {bar} == NVML {nd.get('bar1_total')}")
gpu = next(c for c in report["checks"] if c["id"] == "gpu")
claim(gpu["status"] == "pass", f"check gpu: {gpu['status']} {[f['code'] for f in gpu['findings']]}")
pm = next(c for c in report["checks"] if c["id"] == "peer-memory")
msg = " ".join(f["message"] for f in pm["findings"])
claim("verified" in msg and "not verified" not in msg, f"peer-memory: {msg}")
# GPU x GPU: gdrdoctor topo against nvidia-smi topo -m.
# nvidia-smi underlines its header with escape codes even into a pipe.
lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in open(f"{out}/nvidia-smi-topo.txt").read().splitlines()]
head = lines[0].split()
names = [h for h in head if re.fullmatch(r"GPU\d+", h)]
smi = {}
for line in lines[1:]:
    cells = line.split("\t")
    row = cells[0].strip()
    if row in names:
        vals = [c.strip() for c in cells[1:1 + len(head)]]
        for col, v in zip(head, vals):
            if col in names:
                smi[(row, col)] = v
ours = {}
gdev = [d for d in topo["devices"] if d["kind"] == "gpu"]
idx = {d["name"]: i for i, d in enumerate(topo["devices"])}
for a in gdev:
    for b in gdev:
        ours[(a["name"], b["name"])] = topo["matrix"][idx[a["name"]]][idx[b["name"]]]
# nvidia-smi numbers GPUs by its own order (PCI bus id by default), as gdrdoctor does.
pairs = sorted(k for k in smi if k[0] != k[1])
for k in pairs:
    claim(smi[k] == ours.get(k), f"{k[0]}-{k[1]}: nvidia-smi {smi[k]}, gdrdoctor {ours.get(k)}")
if not pairs:
    print("(one GPU: no GPU x GPU pair to compare)")
cvd = json.load(open(f"{out}/cvd.json"))["inventory"]["gpu_runtime"]
seen = sorted(bdf(d["bus_id"]) for d in cvd.get("cuda", {}).get("devices", []) if d.get("bus_id"))
claim(cvd.get("cleared_env") == ["CUDA_VISIBLE_DEVICES=0"] and seen == sysfs,
      f"with CUDA_VISIBLE_DEVICES=0 set, the probe cleared it ({cvd.get('cleared_env')}) and CUDA saw {seen}")
short = json.load(open(f"{out}/short.json"))
srt = short["inventory"]["gpu_runtime"]
sg = next(c for c in short["checks"] if c["id"] == "gpu")
claim(srt["status"] == "failed" and "did not finish within 0.05 s" in srt.get("error", "")
      and any(f["code"] == "gpu-probe-failed" and f["status"] == "unknown" for f in sg["findings"]),
      f"a 0.05 s deadline: {srt.get('error', srt['status'])[:90]}...; gpu is {sg['status']}")
print(f"{failed} claim(s) failed")
sys.exit(1 if failed else 0)
PY
rc=$?
echo "== timing: gdrdoctor check (GPU probe and GDR write test) vs nvidia-smi topo -m, 10 runs each"
python3 - "$bin" <<'PY'
import statistics, subprocess, sys, time
def med(cmd, n=10):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); ts.append(time.perf_counter() - t)
    return statistics.median(ts), min(ts), max(ts)
rows = [("gdrdoctor check", [sys.argv[1], "check", "--format", "json"]),
        ("gdrdoctor check --no-gdr-test", [sys.argv[1], "check", "--format", "json", "--no-gdr-test"]),
        ("gdrdoctor check --no-gpu-probe --no-gdr-test", [sys.argv[1], "check", "--format", "json", "--no-gpu-probe", "--no-gdr-test"]),
        ("gdrdoctor topo", [sys.argv[1], "topo"]),
        ("nvidia-smi topo -m", ["nvidia-smi", "topo", "-m"])]
res = {name: med(cmd) for name, cmd in rows}
for name, (m, lo, hi) in res.items():
    print(f"{name:46s} median {m*1000:8.1f} ms  (min {lo*1000:.1f}, max {hi*1000:.1f})")
smi = res['nvidia-smi topo -m'][0]
print(f"ratio gdrdoctor check / nvidia-smi topo -m = {res['gdrdoctor check'][0] / smi:.2f}")
print(f"ratio gdrdoctor check --no-gdr-test (GPU probe, no write test) / nvidia-smi topo -m = {res['gdrdoctor check --no-gdr-test'][0] / smi:.2f}")
PY
exit $rc
