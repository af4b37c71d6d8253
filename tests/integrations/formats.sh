#!/usr/bin/env bash
# The machine formats, read by the real consumers:
#   - Prometheus: `promtool check metrics` (Debian's prometheus package) on every fixture's
#     output and on a GDR write test's (per-pair bandwidth, over the stand-in libibverbs), and a
#     real node_exporter serving the file --textfile-dir wrote;
#   - JUnit: parsed by junitparser (PyPI), whose counts must equal the JSON report's.
#   tests/integrations/formats.sh     (as root to install what is missing; GDRDOCTOR_BIN)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}")
cache=${GDRDOCTOR_CACHE:-$HOME/.cache/gdrdoctor-tests}
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

need=()
command -v promtool >/dev/null || need+=(prometheus)
command -v prometheus-node-exporter >/dev/null || need+=(prometheus-node-exporter)
command -v curl >/dev/null || need+=(curl)
command -v cc >/dev/null || need+=(gcc)
# junitparser goes into a venv: python3 -m venv needs ensurepip, which Debian ships in python3-venv.
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
# Debian starts the daemons it installs where it can; these tests start their own.
systemctl stop prometheus prometheus-node-exporter >/dev/null 2>&1 || true

work=$(mktemp -d)
exporter=
# shellcheck disable=SC2317  # run by the trap
cleanup() { if [ -n "$exporter" ]; then kill "$exporter" 2>/dev/null; fi; rm -rf "$work"; }
trap cleanup EXIT
# Every fixture as a directory (the synthetic ones are generated: fixtures/README.md).
fixtures=$work/fixtures
fixtures/build.sh all "$fixtures" >/dev/null

# --- Prometheus ------------------------------------------------------------------------------
n=0
for dir in "$fixtures"/*/; do
  [ -d "$dir/sys" ] || continue
  n=$((n + 1))
  "$bin" --root "$dir" check --format prometheus > "$work/m.prom" || true
  if ! out=$(promtool check metrics < "$work/m.prom" 2>&1); then
    fail "promtool check metrics on ${dir%/}: $out"
  fi
done
if [ "$n" -gt 20 ]; then pass "promtool check metrics accepts the output for all $n fixtures"; else fail "only $n fixtures"; fi

# A GDR write test (host memory, over the stand-in libibverbs the cargo tests use): the per-pair
# gauges, through promtool.
cc -shared -fPIC -Wall -Werror -o "$work/libibverbs.so.1" tests/stubs/ibverbs.c
GDRDOCTOR_LIBIBVERBS=$work/libibverbs.so.1 "$bin" gdr-test --memory host --nic fake0:1 --size 64K \
  --format prometheus > "$work/gdr.prom" || true
if out=$(promtool check metrics < "$work/gdr.prom" 2>&1) \
   && grep -q '^gdrdoctor_gdr_pair_bandwidth_bytes_per_second{.*direction="to_target"} [0-9]' "$work/gdr.prom" \
   && grep -q '^gdrdoctor_gdr_pair_ok{.*} 1$' "$work/gdr.prom"; then
  pass "promtool accepts the GDR pair gauges ($(grep -c '^gdrdoctor_gdr_pair' "$work/gdr.prom") series)"
else
  fail "GDR pair gauges: $out"; cat "$work/gdr.prom"
fi

# node_exporter's textfile collector reads what --textfile-dir wrote.
textdir=$work/textfile; mkdir -p "$textdir"
"$bin" --root "$fixtures/acs-redirect-on-path" check --format reason --textfile-dir "$textdir" >/dev/null || true
port=$((20000 + RANDOM % 20000))
prometheus-node-exporter --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
  --collector.textfile --collector.textfile.directory="$textdir" > "$work/exporter.log" 2>&1 &
exporter=$!
scraped=
# Poll until it serves (under a second when the machine is idle; 30 s for a loaded one).
for _ in $(seq 1 300); do
  scraped=$(curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null) && break
  sleep 0.1
done
if grep -q '^gdrdoctor_ready 0$' <<<"$scraped" \
   && grep -q '^gdrdoctor_check_status{check="acs",status="fail"} 1$' <<<"$scraped" \
   && grep -q '^node_textfile_scrape_error 0$' <<<"$scraped"; then
  pass "node_exporter serves the textfile: gdrdoctor_ready 0, acs fail, node_textfile_scrape_error 0"
else
  fail "node_exporter did not serve the gdrdoctor metrics"; grep -E 'gdrdoctor_ready|textfile' <<<"$scraped" | head || true; tail -5 "$work/exporter.log"
fi

# --- JUnit -----------------------------------------------------------------------------------
venv=$cache/junit-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import junitparser' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q 'junitparser==3.2.0'
fi
for name in acs-redirect-on-path healthy-8gpu-roce config-unprivileged arm64-iommu-translated; do
  dir=$fixtures/$name
  for strict in "" --strict; do
    "$bin" --root "$dir" check $strict --format junit > "$work/r.xml" || true
    "$bin" --root "$dir" check $strict --format json > "$work/r.json" || true
    if out=$("$venv/bin/python" - "$work/r.xml" "$work/r.json" "$strict" <<'PY'
import json, sys
from junitparser import JUnitXml, Failure, Error, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
report = json.load(open(sys.argv[2]))
strict = sys.argv[3] == "--strict"
cases = [c for suite in xml for c in suite]
findings = [f for c in report["checks"] for f in c["findings"]]
empty = [c for c in report["checks"] if not c["findings"]]
# A run that verified nothing carries one more case: the verdict's own error.
nothing = report["verdict"]["state"] == "nothing-verified"
assert len(cases) == len(findings) + len(empty) + nothing, (len(cases), len(findings), len(empty))
def kinds(c):
    return {type(r).__name__ for r in c.result}
failures = sum(1 for c in cases if "Failure" in kinds(c))
errors = sum(1 for c in cases if "Error" in kinds(c))
want_fail = sum(1 for f in findings if f["status"] == "fail" or (strict and f["status"] == "warn"))
want_err = sum(1 for f in findings if strict and f["status"] == "unknown") + nothing
assert failures == want_fail, (failures, want_fail)
assert errors == want_err, (errors, want_err)
assert (failures + errors == 0) == report["verdict"]["ready"], "failures iff not ready"
assert xml.failures == failures and xml.errors == errors and xml.tests == len(cases)
print(f"{len(cases)} testcases, {failures} failures, {errors} errors, ready={report['verdict']['ready']}")
PY
    ); then pass "junitparser reads $name${strict:+ $strict}: $out"; else fail "junit $name $strict: $out"; fi
  done
done

echo
if [ "$failed" = 0 ]; then echo "formats: all checks passed"; else echo "formats: $failed check(s) FAILED"; fi
exit "$failed"
