#!/usr/bin/env bash
# Issue 9 on a GPU machine (the device tool's): the machine formats and --deadline with real
# NVML/CUDA, and the .deb installed there. Prints PASS/FAIL per claim; output under $OUT.
# Usage: integrations.sh [BINARY] [DEB]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
bin=$(realpath "${1:-target/release/gdrdoctor}")
deb=${2:-}
out=${OUT:-/tmp/gdrdoctor-gpu}
mkdir -p "$out"
failed=0
claim() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=$((failed + 1)); fi; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
echo "== machine"; uname -r; nvidia-smi -L
echo "== nfd, reason, prometheus, junit (live, GPU probe and write test included)"
"$bin" check --format nfd | tee "$out/nfd.txt"
grep -qx 'feature.node.kubernetes.io/gdr.path=dmabuf' "$out/nfd.txt"; claim $? "nfd: gdr.path=dmabuf (the probe exported a dma-buf on each GPU)"
grep -qx 'feature.node.kubernetes.io/gdr.check.gpu=pass' "$out/nfd.txt"; claim $? "nfd: gdr.check.gpu=pass"
"$bin" check --format reason | tee "$out/reason.txt"
grep -qxE 'gdrdoctor: [a-z-]+\(rdma-no-device\)' "$out/reason.txt"; claim $? "reason: the one blocking code on a node without a NIC"
"$bin" check --format prometheus > "$out/metrics.prom"
grep -E '^gdrdoctor_(ready|verified|gpus|check_status\{check="gpu",status="pass"\}|run_duration_seconds) ' "$out/metrics.prom"
grep -qx 'gdrdoctor_check_status{check="gpu",status="pass"} 1' "$out/metrics.prom"; claim $? "prometheus: gpu pass"
"$bin" check --format junit > "$out/report.xml"
python3 -c "import xml.etree.ElementTree as E,sys; r=E.parse(sys.argv[1]).getroot(); print(r.tag, r.attrib)" "$out/report.xml"; claim $? "junit: well-formed XML"
echo "== --deadline with real cuInit"
for d in 0.35 0.6 1 3; do
  t=$(date +%s%N)
  "$bin" --deadline "$d" check --format json > "$out/deadline-$d.json"; rc=$?
  took=$(ms "$t")
  python3 - "$out/deadline-$d.json" "$d" "$took" "$rc" <<'PY' || failed=$((failed + 1))
import json, sys
r = json.load(open(sys.argv[1])); d = float(sys.argv[2]); took = int(sys.argv[3])
st = {c["id"]: c["status"] for c in r["checks"]}
gpu = next(c for c in r["checks"] if c["id"] == "gpu")
msg = gpu["findings"][0]["message"][:150]
print(f"--deadline {d}: {took} ms, exit {sys.argv[4]}, gpu={st['gpu']}, gdr-test={st['gdr-test']}: {msg}")
ok = took <= d * 1000 + 50 and (st["gpu"] == "pass" or "cut short" in msg or "no time" in msg)
print("PASS" if ok else "FAIL", f"--deadline {d}: ended in time; gpu is pass or says it was cut short")
sys.exit(0 if ok else 1)
PY
done
if [ -n "$deb" ] && command -v dpkg >/dev/null; then
  echo "== the .deb, installed here"
  dpkg -i "$deb" >/dev/null; claim $? "dpkg -i $(basename "$deb")"
  t=$(date +%s%N); /usr/bin/gdrdoctor --deadline 15 check --no-gdr-test --format reason; echo "exit $? in $(ms "$t") ms (the Slurm prolog's fast profile)"
  mkdir -p /run/gdrdoctor
  exec_line=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/gdrdoctor.service)
  exec_line=${exec_line//\$\{GDRDOCTOR_BOOT_DEADLINE\}/60}; exec_line=${exec_line//\$GDRDOCTOR_BOOT_ARGS/}
  t=$(date +%s%N); $exec_line > /dev/null; echo "boot unit command: exit $? in $(ms "$t") ms"
  cat /run/gdrdoctor/reason; ls -l /run/gdrdoctor
  test -s /run/gdrdoctor/report.json; claim $? "the boot unit's command left /run/gdrdoctor/report.json"
  if command -v man >/dev/null; then echo "man gdrdoctor-check lines with --deadline: $(MANPAGER="cat" man gdrdoctor-check 2>/dev/null | grep -c -- --deadline)"; else echo "(no man command here)"; fi
  dpkg -P gdrdoctor >/dev/null; claim $? "dpkg -P"
fi
echo "$failed claim(s) failed"
exit "$failed"
