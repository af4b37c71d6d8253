#!/usr/bin/env bash
# Issue 24 on a GPU machine with any number of NVIDIA GPUs: the NVML facts of GPUs that work
# together, against nvidia-smi, live and from a capture.
#  - `probe-gpu --nvml` against `nvidia-smi -q` and `nvidia-smi nvlink -s`: each GPU's
#    persistence mode, its active and inactive NVLinks, its fabric state and status;
#  - `capture` records NVML's answer (gdrdoctor/nvml.json), and `check` on the capture gives the
#    same gpu findings as `check` live, and `topo` on it the same NV# cells as `nvidia-smi topo -m`.
# Changes nothing on the machine (persistence mode and the rest are read, never set).
# Prints PASS/FAIL per claim and exits non-zero if one fails. Output under $OUT (at most 8 files:
# log.txt is this output).
# Usage: nvml-facts.sh [BINARY]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
bin=$(realpath "${1:-target/release/gdrdoctor}")
out=${OUT:-/tmp/gdrdoctor-nvml}
mkdir -p "$out"
tmp=$(mktemp -d)
failed=0
claim() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=$((failed + 1)); fi; }

echo "== machine"
uname -r
nvidia-smi -L
{
  echo "== nvidia-smi -q"; nvidia-smi -q
  echo "== nvidia-smi nvlink -s"; nvidia-smi nvlink -s
  echo "== nvidia-smi topo -m"; nvidia-smi topo -m
} > "$out/smi.txt" 2>&1

echo "== NVML through gdrdoctor"
"$bin" probe-gpu --nvml > "$out/probe-nvml.json"; echo "probe-gpu exit $?"
python3 - "$out/probe-nvml.json" "$out/smi.txt" > "$tmp/facts.txt" <<'PY'
import json, re, sys
probe = json.load(open(sys.argv[1]))
smi = open(sys.argv[2]).read()
nvml = probe["nvml"]
print("nvml status:", nvml["status"], nvml.get("driver_version"))
q = smi.split("== nvidia-smi nvlink -s")[0]
links = smi.split("== nvidia-smi nvlink -s")[1].split("== nvidia-smi topo -m")[0]
# nvidia-smi -q: per GPU block, persistence and the Fabric section.
blocks = re.split(r"\n(?=GPU [0-9A-F]{8}:)", q)
smi_gpu = {}
for b in blocks[1:]:
    bus = b.split("\n", 1)[0].split()[1]
    pm = re.search(r"Persistence Mode\s*:\s*(\S+)", b)
    fab = re.search(r"\n    Fabric\n\s*State\s*:\s*([^\n]+)\n\s*Status\s*:\s*([^\n]+)", b)
    smi_gpu[bus] = (pm and pm.group(1), fab and fab.group(1).strip(), fab and fab.group(2).strip())
# nvidia-smi nvlink -s: "GPU i: ..." then "Link n: 26.562 GB/s" or "Link n: <inactive>".
smi_links = []
for part in re.split(r"\n(?=GPU \d+:)", "\n" + links.strip())[1:]:
    up = len(re.findall(r"Link \d+: [0-9.]+ GB/s", part))
    down = sorted(int(n) for n in re.findall(r"Link (\d+): <inactive>", part))
    smi_links.append((up, down))
bad = 0
for d in nvml["devices"]:
    i, bus = d["index"], d["bus_id"]
    pm, state, status = smi_gpu.get(bus, (None, None, None))
    f = d.get("fabric") or {}
    ours = ("Enabled" if d.get("persistence_mode") else "Disabled", f.get("state"), f.get("status"))
    theirs = (pm, state, status)
    # A GPU without NVLink (a single H100 in a VM) gets no section from `nvidia-smi nvlink -s`
    # at all: no link up, none down; NVML says the same as 0 links.
    up, down = smi_links[i] if i < len(smi_links) else ((0, []) if not links.strip() else (None, None))
    same_pm = ours[0] == pm
    smi_state = {"Completed": "completed", "In Progress": "in-progress", "Not Started": "not-started", "N/A": "not-supported"}.get(state, state)
    same_fab = state is None and f.get("state") in (None, "not-supported") or smi_state == f.get("state")
    same_status = state in (None, "N/A") or (status == "Success") == (f.get("status") == "NVML_SUCCESS")
    same_links = (len(d["nvlinks"]), d.get("nvlinks_down", [])) == (up, down)
    print(f"GPU {i} {bus}: persistence {ours[0]} / smi {pm}; fabric {f.get('state')} {f.get('status')} via {f.get('call')} / smi {state} {status}; "
          f"NVLinks {len(d['nvlinks'])} up, down {d.get('nvlinks_down')} / smi {up} up, down {down}; errors {d['errors']}")
    for ok, what in [(same_pm, "persistence"), (same_fab, "fabric state"), (same_status, "fabric status"), (same_links, "links")]:
        print(("PASS" if ok else "FAIL"), f"GPU {i} {what} as nvidia-smi says")
        bad += not ok
print("NVML-FACTS", "same" if bad == 0 else f"{bad} differ")
PY
cat "$tmp/facts.txt"
claim "$(grep -q '^NVML-FACTS same' "$tmp/facts.txt" && echo 0 || echo 1)" \
  "each GPU's persistence mode, NVLinks and fabric state as nvidia-smi says"

echo "== NVLink-C2C as NCCL asks NVML for it (issue 38)"
# NCCL (src/graph/xml.cc) asks NVML_FI_DEV_C2C_LINK_COUNT and each link's status: a GPU without
# C2C (every PCIe/SXM H100 and H200) answers no link, and NCCL builds no c2c node for it.
nvidia-smi c2c -s > "$out/smi-c2c.txt" 2>&1; echo "nvidia-smi c2c -s exit $?" >> "$out/smi-c2c.txt"
cat "$out/smi-c2c.txt"
python3 - "$out/probe-nvml.json" "$out/smi-c2c.txt" > "$tmp/c2c.txt" <<'PY'
import json, re, sys
probe = json.load(open(sys.argv[1]))
smi = open(sys.argv[2]).read()
bad = 0
for d in probe["nvml"]["devices"]:
    c2c = d.get("c2c")
    errs = [e for e in d["errors"] if "C2C" in e]
    print(f"GPU {d['index']} {d['bus_id']}: c2c {c2c}, errors {errs}")
    if c2c is None or errs:
        bad += 1
# nvidia-smi's own view: on a GPU without C2C it prints no link (or says it is not supported).
smi_links = len(re.findall(r"C2C Link \d+:", smi))
ours = sum(d["c2c"]["active"] for d in probe["nvml"]["devices"] if d.get("c2c"))
print(f"nvidia-smi c2c links {smi_links}; NVML's active links {ours}")
print("C2C-FACTS", "same" if bad == 0 and smi_links == ours else f"{bad} unanswered, smi {smi_links} vs {ours}")
PY
cat "$tmp/c2c.txt"
claim "$(grep -q '^C2C-FACTS same' "$tmp/c2c.txt" && echo 0 || echo 1)" \
  "NVML answers each GPU's C2C links as nvidia-smi c2c counts them (none on a GPU without C2C)"

echo "== capture, then check live and offline"
"$bin" capture "$out/capture.tar.gz" 2> "$tmp/capture.log"; echo "capture exit $?"; cat "$tmp/capture.log"
claim "$(grep -q "NVML's answer" "$tmp/capture.log" && echo 0 || echo 1)" "capture recorded NVML's answer"
"$bin" check --no-gdr-test --format json > "$out/live.json"; echo "live check exit $?"
"$bin" --root "$out/capture.tar.gz" check --format json > "$out/offline.json"; echo "offline check exit $?"
"$bin" check --no-gdr-test -v --color never | sed -n '/ gpu /,/^[A-Z]/p'
python3 - "$out/live.json" "$out/offline.json" > "$tmp/compare.txt" <<'PY'
import json, sys
live, off = (json.load(open(p)) for p in sys.argv[1:3])
def gpu(r):
    c = next(c for c in r["checks"] if c["id"] == "gpu")
    out = []
    for f in c["findings"]:
        if f["subject"] == "node":
            continue
        m = f["message"].split("; GPUDirect RDMA supported (CUDA)")[0].split(" (NVML as the capture recorded it")[0]
        out.append((f["code"], f["status"], f["subject"], m))
    return out
a, b = gpu(live), gpu(off)
for x in a:
    print("live   ", x)
for x in b:
    print("offline", x)
print("GPU-FINDINGS", "same" if a == b else "DIFFER")
# BAR1 in use is a reading of the moment, not a fact of the node: the live check's own GPU
# workers hold BAR1 mappings while NVML is asked (seen: 1835008 live, 1703936 at capture time).
def steady(r):
    nvml = json.loads(json.dumps(r["inventory"]["gpu_runtime"].get("nvml")))
    for d in (nvml or {}).get("devices", []):
        d.pop("bar1_used", None)
    return nvml
print("NVML-ANSWER", "same" if steady(live) == steady(off) else "DIFFERS")
print("offline gpu_runtime status:", off["inventory"]["gpu_runtime"]["status"])
PY
cat "$tmp/compare.txt"
claim "$(grep -q '^GPU-FINDINGS same' "$tmp/compare.txt" && echo 0 || echo 1)" \
  "the capture gives the gpu findings the live check gave"
claim "$(grep -q '^NVML-ANSWER same' "$tmp/compare.txt" && echo 0 || echo 1)" \
  "the capture's NVML answer is the live one (BAR1 in use aside: a reading of the moment)"

echo "== topo offline against nvidia-smi topo -m"
"$bin" topo --color never > "$out/topo.txt"
echo "== offline" >> "$out/topo.txt"
"$bin" --root "$out/capture.tar.gz" topo --color never >> "$out/topo.txt"
cat "$out/topo.txt"
python3 - "$out/smi.txt" "$out/topo.txt" > "$tmp/topo.txt" <<'PY'
import re, sys
def nv(text):
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines = text.splitlines()
    head = next(l for l in lines if l.lstrip().startswith("GPU0"))
    cols = [h.strip() for h in head.split("\t") if h.strip()]
    rows = {}
    for l in lines[lines.index(head) + 1:]:
        if not l.startswith("GPU"):
            break
        cells = [c.strip() for c in l.split("\t")]
        rows[cells[0]] = [c for c, h in zip(cells[1:], cols) if re.fullmatch(r"GPU\d+", h)]
    return rows
smi = nv(open(sys.argv[1]).read().split("== nvidia-smi topo -m")[1])
off = nv(open(sys.argv[2]).read().split("== offline")[1])
print("smi    ", smi)
print("offline", off)
print("TOPO-OFFLINE", "same" if smi == off else "DIFFERS")
PY
cat "$tmp/topo.txt"
claim "$(grep -q '^TOPO-OFFLINE same' "$tmp/topo.txt" && echo 0 || echo 1)" \
  "topo on the capture shows nvidia-smi's NV# cells"
echo "== summary"
echo "$failed claim(s) failed"
exit $((failed > 0))
