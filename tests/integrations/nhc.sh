#!/bin/bash
# tests/integrations/nhc.sh: the NHC check function in packaging/nhc/gdrdoctor.nhc.
#
# HONEST SCOPE: this does NOT run NHC (LBNL Node Health Check; Debian has no package). It sources
# the check file into a bash harness that defines die() the way NHC's check contract works: a
# failing check calls `die 1 "message"` (NHC records the message, marks the node offline with it
# and stops; NHC's own unit tests replace die() with one that saves the code and message and
# returns the code), then `return 1`. Here die() records the code and message and returns the code,
# so the harness can assert on what NHC would have put into the node's reason. What it does not
# cover: NHC's watchdog, its config parsing, node-mark-offline's "NHC:" prefix.
#
# Usage (from the repository root):
#   tests/integrations/nhc.sh
#   GDRDOCTOR_BIN=/path/to/gdrdoctor tests/integrations/nhc.sh
# GDRDOCTOR_BIN defaults to ${CARGO_TARGET_DIR:-target}/release/gdrdoctor, relative to the root.
set -u
cd "$(dirname "$0")/../.." || exit 2
REPO=$(pwd -P)
BIN=${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}
case "$BIN" in /*) ;; *) BIN=$REPO/$BIN ;; esac
[ -x "$BIN" ] || { echo "SETUP ERROR: no gdrdoctor binary at $BIN (set GDRDOCTOR_BIN)" >&2; exit 2; }

PASS=0; FAILS=0
pass() { echo "PASS: $1"; PASS=$((PASS + 1)); }
fail() { echo "FAIL: $1${2:+  ($2)}"; FAILS=$((FAILS + 1)); }
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2', want '$3'"; fi; }
now() { date +%s%N; }
ms() { echo $(( ($(now) - $1) / 1000000 )); }
SCRATCH=$(mktemp -d /tmp/gdrdoctor-nhc.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
# The fixtures it runs on, as directories (generated, not committed: fixtures/README.md).
FIXTURES=$SCRATCH/fixtures
for f in healthy-8gpu-roce acs-redirect-on-path roce-v1-only; do
  fixtures/build.sh "$f" "$FIXTURES/$f" >/dev/null || { echo "SETUP ERROR: fixtures/build.sh $f" >&2; exit 2; }
done

# NHC's die() contract, as its unit tests mimic it: record the code and the message, return the code.
DIE_RC='' DIE_MSG='' DIE_CALLS=0
die() { DIE_RC=$1; shift; DIE_MSG="$*"; DIE_CALLS=$((DIE_CALLS + 1)); return "$DIE_RC"; }

# shellcheck source=packaging/nhc/gdrdoctor.nhc
. "$REPO/packaging/nhc/gdrdoctor.nhc"

# run_check ARGS...: call check_gdrdoctor as nhc.conf would, in this shell (NHC runs checks in its
# own shell, so globals and locals must behave). Sets RC and MS; resets the die() record first.
run_check() {
  local s; s=$(now)
  DIE_RC='' DIE_MSG='' DIE_CALLS=0
  check_gdrdoctor "$@"; RC=$?
  MS=$(ms "$s")
  if [ "$DIE_CALLS" -gt 0 ]; then
    echo "  check_gdrdoctor $*: return $RC in $MS ms; die $DIE_RC \"$DIE_MSG\""
  else
    echo "  check_gdrdoctor $*: return $RC in $MS ms; no die"
  fi
}

echo "gdrdoctor: $("$BIN" --version)   binary: $BIN"
export GDRDOCTOR=$BIN

echo "== ready (fixture healthy-8gpu-roce)"
before=$(compgen -v | sort)
run_check 20 --root "$FIXTURES/healthy-8gpu-roce"
leaked=$(comm -13 <(echo "$before") <(compgen -v | sort) | grep -vxE 'RC|MS|before' | tr '\n' ' ')
expect_eq "check_gdrdoctor sets no global variables (NHC runs every check in one shell)" "$leaked" ""
expect_eq "ready: returns 0" "$RC" 0
expect_eq "ready: die not called" "$DIE_CALLS" 0

echo "== not ready (fixture acs-redirect-on-path)"
run_check 20 --root "$FIXTURES/acs-redirect-on-path"
expect_eq "not-ready: returns 1" "$RC" 1
expect_eq "not-ready: die called once" "$DIE_CALLS" 1
expect_eq "not-ready: die code" "$DIE_RC" 1
expect_eq "not-ready: die message is gdrdoctor's line" "$DIE_MSG" "gdrdoctor: acs-redirect-on-path"

echo "== not ready, no deadline argument (default 20), full report to GDRDOCTOR_NHC_OUTPUT"
GDRDOCTOR_NHC_OUTPUT="json:$SCRATCH/nhc.json" run_check --root "$FIXTURES/roce-v1-only"
expect_eq "default-deadline: die message" "$DIE_MSG" "gdrdoctor: roce-v1-only"
if grep -q '"roce-v1-only"' "$SCRATCH/nhc.json" 2>/dev/null; then pass "output: JSON report written"
else fail "output: JSON report written"; fi

echo "== could not run (missing binary)"
GDRDOCTOR=$SCRATCH/no-such-gdrdoctor run_check 20 --root "$FIXTURES/healthy-8gpu-roce"
expect_eq "missing: returns 1" "$RC" 1
expect_eq "missing: die message" "$DIE_MSG" "gdrdoctor: could not run (exit 127)"

echo "== could not run (bad --root: gdrdoctor exits 2)"
run_check 20 --root "$SCRATCH/not-a-capture"
expect_eq "exit-2: die message" "$DIE_MSG" "gdrdoctor: could not run (exit 2)"

echo "== the deadline must fit in NHC's TIMEOUT"
TIMEOUT=30 run_check 28 --root "$FIXTURES/healthy-8gpu-roce"
expect_eq "timeout-fit: refused" "$RC" 1
case "$DIE_MSG" in *"does not fit in NHC timeout 30s"*) pass "timeout-fit: says why" ;;
  *) fail "timeout-fit: says why" "got '$DIE_MSG'" ;; esac
TIMEOUT=30 run_check 20 --root "$FIXTURES/healthy-8gpu-roce"
expect_eq "timeout-fit: 20 within 30 accepted" "$RC" 0

echo "== backstop (a gdrdoctor that hangs and ignores TERM; deadline 1: TERM at 4 s, KILL at 6 s)"
printf '#!/bin/bash\ntrap "" TERM\nwhile :; do sleep 1; done\n' > "$SCRATCH/hang"
chmod +x "$SCRATCH/hang"
GDRDOCTOR=$SCRATCH/hang run_check 1
expect_eq "backstop: die message" "$DIE_MSG" "gdrdoctor: timed out after 4s"
if [ "$MS" -le 8000 ]; then pass "backstop: ended within 8 s ($MS ms)"; else fail "backstop: ended within 8 s" "$MS ms"; fi
if pgrep -f "$SCRATCH/hang" >/dev/null; then fail "backstop: hung process killed"; else pass "backstop: hung process killed"; fi

echo "RESULT: $PASS passed, $FAILS failed"
[ "$FAILS" = 0 ]
