#!/usr/bin/env bash
# Issue 17, items 2-3 on a GPU machine without an RDMA NIC (the device tool's one-H100 machine:
# NCCL 2.28.3 in the system library path, 2.28.9 in PyTorch's pip wheel):
#  - `gdrdoctor nccl verify` with the system libnccl.so.2 (the dynamic loader's), with the
#    wheel's (--library, and LD_LIBRARY_PATH): each run loads the library it should, runs NCCL
#    (a one-rank communicator on one GPU, an all-reduce over NET with P2P and SHM off on several),
#    reports the Socket fallback ("falls back to NET/Socket: no RDMA device"), and agrees with
#    gdrdoctor's own rdma-no-device verdict (no nccl-disagrees);
#  - the pip wheel is found by the search itself (a pip-wheel candidate under python3's sys.path);
#  - `gdrdoctor check --nccl-verify`: rdma-link fails with rdma-no-device, nccl-verify fails with
#    nccl-no-gdr and nccl-agrees, and without --nccl-verify it is left out of the report.
# NCCL's own log and topology dump of each run are kept under $OUT (--log-dir).
# Prints PASS/FAIL per claim and exits with the number of failed claims. Output under $OUT.
# Usage: nccl-verify.sh [BINARY]   (default target/release/gdrdoctor)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
bin=$(realpath "${1:-target/release/gdrdoctor}")
out=${OUT:-/tmp/gdrdoctor-nccl-verify}
mkdir -p "$out"
failed=0
claim() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=$((failed + 1)); fi; }
# claims_of FILE [PREFIX]: a claim for each PASS/FAIL line a judge (python below) wrote to FILE.
claims_of() {
  while IFS= read -r line; do
    case $line in
      PASS\ *) claim 0 "${2:-}${line#PASS }" ;;
      FAIL\ *) claim 1 "${2:-}${line#FAIL }" ;;
    esac
  done < "$1"
}

echo "== machine"
uname -r
nvidia-smi -L || true
nvidia-smi --query-gpu=pci.bus_id,driver_version --format=csv || true
ls /sys/class/infiniband 2>/dev/null || echo "no /sys/class/infiniband"
echo "libnccl.so.2 in the loader's cache:"
ldconfig -p | grep 'libnccl\.so\.2' || echo "  none"
"$bin" --version || true

# judge FILE.json EXIT LABEL [SOURCE]: the claims every run must meet; prints what it saw.
judge() {
  local json=$1 rc=$2 label=$3 source=${4:-}
  python3 - "$json" "$rc" "$source" > "$out/$label.judged" 2>&1 <<'PY'
import json, sys
path, rc, source = sys.argv[1], int(sys.argv[2]), sys.argv[3]
try:
    d = json.load(open(path))
except Exception as e:
    print(f"FAIL the output is JSON ({e})")
    sys.exit(0)
a = d.get("answer", {})
run = d.get("run", {})
codes = [(f.get("code"), f.get("status")) for f in d.get("findings", [])]
used = None
cands = run.get("search", {}).get("candidates", [])
tried = (run.get("answer") or {}).get("tried", [])
if (run.get("answer") or {}).get("library") and len(tried) < len(cands):
    used = cands[len(tried)]
print("INFO answer:", a.get("text"))
print("INFO version:", a.get("version"), "library:", a.get("library"), "source:", used)
print("INFO mode:", run.get("mode"), "gpus:", run.get("gpus"), "elapsed_ms:", run.get("elapsed_ms"),
      "outcome:", (run.get("answer") or {}).get("outcome"), "error:", run.get("error"))
print("INFO findings:", codes)
for c in d.get("comparisons", []):
    print(f"INFO fact {c.get('fact')}: agree={c.get('agree')} NCCL: {c.get('nccl')} | gdrdoctor: {c.get('gdrdoctor')}")
def claim(ok, text):
    print(("PASS " if ok else "FAIL ") + text)
claim(rc == 1, f"exit 1 (NCCL does not use GDR here), got {rc}")
claim(bool(a.get("version")), "NCCL ran and gave its version")
claim((run.get("answer") or {}).get("outcome", {}).get("result") == "ok",
      "the all-reduce ran and summed right")
claim(a.get("network") == "Socket", f"NCCL's network is Socket (got {a.get('network')})")
text = a.get("text") or ""
claim("falls back to NET/Socket: no RDMA device" in text, "the answer says: falls back to NET/Socket: no RDMA device")
claim(("nccl-no-gdr", "fail") in codes, "nccl-no-gdr (fail)")
claim(("nccl-agrees", "pass") in codes, "nccl-agrees (pass): NCCL agrees with gdrdoctor's facts")
claim(not any(c == "nccl-disagrees" for c, _ in codes), "no nccl-disagrees")
net = [c for c in d.get("comparisons", []) if c.get("fact") == "network"]
claim(bool(net) and net[0].get("agree") is True and "rdma-no-device" in (net[0].get("gdrdoctor") or ""),
      "the network fact agrees with rdma-link's rdma-no-device")
claim(any(c.get("fact", "").startswith("topo-") and c.get("agree") is True for c in d.get("comparisons", [])),
      "NCCL's topology dump was read and compared")
if source:
    claim(used is not None and used.get("source") == source, f"the library came from the {source} candidate")
PY
  grep '^INFO' "$out/$label.judged"
  local line
  claims_of "$out/$label.judged" "$label: "
}

# verify LABEL [ARGS...]: one `nccl verify` run, human and JSON; the JSON run keeps NCCL's files.
verify() {
  local label=$1
  shift
  echo "== nccl verify: $label"
  "$bin" nccl verify --color never "$@" > "$out/$label.txt" 2>&1
  echo "human exit $?; last line: $(tail -n 1 "$out/$label.txt")"
  "$bin" nccl verify --format json --log-dir "$out/$label-nccl" "$@" > "$out/$label.json" 2> "$out/$label.stderr"
  local rc=$?
  echo "json exit $rc; NCCL's files: $(find "$out/$label-nccl" -type f 2>/dev/null | tr '\n' ' ')"
  return "$rc"
}

# The system's libnccl.so.2, as the dynamic loader finds it.
verify system; rc=$?
judge "$out/system.json" "$rc" system loader

# The wheel of the python3 on PATH (PyTorch depends on nvidia-nccl-cu12/cu13).
wheel=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2> "$out/wheel.stderr")
echo "== the pip wheel: ${wheel:-none} $(cat "$out/wheel.stderr")"
if [ -n "$wheel" ] && [ -e "$wheel/libnccl.so.2" ]; then
  claim 0 "python3 on PATH has nvidia.nccl with lib/libnccl.so.2"
  verify wheel --library "$wheel/libnccl.so.2"; rc=$?
  judge "$out/wheel.json" "$rc" wheel option
  LD_LIBRARY_PATH="$wheel${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" verify wheel-ld-library-path; rc=$?
  judge "$out/wheel-ld-library-path.json" "$rc" wheel-ld-library-path loader
  python3 - "$out/system.json" "$out/wheel.json" "$out/wheel-ld-library-path.json" "$wheel/libnccl.so.2" > "$out/libraries.judged" <<'PY'
import json, os, sys
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return {}
system, wheel, ld, lib = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3]), sys.argv[4]
v = lambda d: (d.get("answer") or {}).get("version")
print(f"INFO versions: system {v(system)}, wheel {v(wheel)}, wheel by LD_LIBRARY_PATH {v(ld)}")
print(("PASS" if v(system) and v(wheel) and v(system) != v(wheel) else "FAIL"),
      "the system's and the wheel's NCCL are two different releases, each run on its own")
print(("PASS" if v(ld) == v(wheel) else "FAIL"), "LD_LIBRARY_PATH makes the loader take the wheel's copy")
real = os.path.realpath(lib)
found = [c for c in system.get("run", {}).get("search", {}).get("candidates", []) if c.get("source") == "pip-wheel"]
print("INFO pip-wheel candidates of the default search:", found)
print(("PASS" if any(os.path.realpath(c.get("library", "")) == real for c in found) else "FAIL"),
      "the default search finds the wheel's copy under python3's sys.path")
PY
  grep '^INFO' "$out/libraries.judged"
  claims_of "$out/libraries.judged"
else
  claim 1 "python3 on PATH has nvidia.nccl with lib/libnccl.so.2 (PyTorch's wheel)"
fi

echo "== check --nccl-verify"
"$bin" check --format json > "$out/check.json"; rc_off=$?
"$bin" check --nccl-verify --format json > "$out/check-nccl-verify.json"; rc_on=$?
"$bin" check --nccl-verify --color never -v > "$out/check-nccl-verify.txt" 2>&1
echo "check exit $rc_off; check --nccl-verify exit $rc_on; last line: $(tail -n 1 "$out/check-nccl-verify.txt")"
python3 - "$out/check.json" "$out/check-nccl-verify.json" "$rc_on" > "$out/check.judged" <<'PY'
import json, sys
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return {}
off, on, rc = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
def check(r, cid):
    return next((c for c in r.get("checks", []) if c.get("id") == cid), {})
def codes(c):
    return [(f.get("code"), f.get("status")) for f in c.get("findings", [])]
nv_off, nv_on, rl = check(off, "nccl-verify"), check(on, "nccl-verify"), check(on, "rdma-link")
print("INFO without --nccl-verify:", nv_off.get("status"), codes(nv_off))
print("INFO with: nccl-verify", nv_on.get("status"), codes(nv_on), "; rdma-link", rl.get("status"), codes(rl))
print("INFO inventory.nccl_verify:", on.get("inventory", {}).get("nccl_verify"))
say = lambda ok, t: print(("PASS " if ok else "FAIL ") + t)
say(not nv_off, "check without --nccl-verify leaves nccl-verify out")
say(rc == 1, f"check --nccl-verify exits 1 (no RDMA device), got {rc}")
say(("rdma-no-device", "fail") in codes(rl), "rdma-link: rdma-no-device")
say(nv_on.get("status") == "fail" and ("nccl-no-gdr", "fail") in codes(nv_on), "nccl-verify: nccl-no-gdr (fail)")
say(("nccl-agrees", "pass") in codes(nv_on) and not any(c == "nccl-disagrees" for c, _ in codes(nv_on)),
    "nccl-verify agrees with gdrdoctor's verdict (nccl-agrees, no nccl-disagrees)")
PY
grep '^INFO' "$out/check.judged"
claims_of "$out/check.judged" "check: "

echo
echo "$failed claim(s) failed"
exit "$failed"
