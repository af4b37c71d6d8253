# shellcheck shell=bash
# The claims of the integrations that run a real service (slurm.sh, nhc.sh, systemd.sh), sourced
# by each: a PASS or FAIL line per claim, counted in PASS and FAILS, and millisecond timings.

now() { date +%s%N; }
ms() { echo $(( ($(now) - $1) / 1000000 )); }
PASS=0; FAILS=0
pass() { echo "PASS: $1"; PASS=$((PASS + 1)); }
fail() { echo "FAIL: $1${2:+  ($2)}"; FAILS=$((FAILS + 1)); }
check() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; fi; }
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2', want '$3'"; fi; }
