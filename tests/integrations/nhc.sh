#!/bin/bash
# tests/integrations/nhc.sh: packaging/nhc/gdrdoctor.nhc in the REAL LBNL Node Health Check (NHC
# 1.4.3, unpacked from tests/integrations/nhc/lbnl-nhc-9c4a38c.tar.gz: see the README there), then
# NHC as the HealthCheckProgram of a REAL single-node Slurm.
#
# 1. gdrdoctor.nhc installed as packaging/nhc/README.md tells sites (copied into the scripts
#    directory beside NHC's own, `* || check_gdrdoctor ...` added to nhc.conf), and NHC itself run
#    as root, `nhc -c CONF -D CONFDIR` with its watchdog (-t), on fixture roots (directories made by
#    fixtures/build.sh): a ready node passes; a node that is not ready fails with gdrdoctor's codes
#    in NHC's message; a missing, failing or hung gdrdoctor fails too, never passes.
# 2. NHC's own test suite (test/nhc-test) with gdrdoctor.nhc in its scripts directory.
# 3. Slurm (Debian's slurm-wlm and munge, installed with apt when missing; the private lab of
#    slurm-lab.sh, shared with slurm.sh) runs NHC as its HealthCheckProgram: NHC's own
#    helpers/node-mark-offline drains the node with "NHC: gdrdoctor: <codes>", and node-mark-online
#    resumes it once the check passes, but only where NHC set the reason. The HealthCheckProgram is
#    a wrapper that execs the unpacked nhc with this lab's directories (slurmd passes no arguments;
#    a site's nhc finds /etc/nhc by default).
# Each claim prints one PASS/FAIL line; the exit status is 1 when any failed, 2 when the lab could
# not be set up.
#
# Usage (root, from the repository root):
#   tests/integrations/nhc.sh
#   GDRDOCTOR_BIN=/path/to/gdrdoctor tests/integrations/nhc.sh
# Environment:
#   GDRDOCTOR_BIN   the gdrdoctor binary (default ${CARGO_TARGET_DIR:-target}/release/gdrdoctor,
#                   relative to the repository root)
#   SLURM_LAB_PORT  slurmctld port; slurmd uses the next one (default 16837)
#   KEEP_LAB=1      keep the lab directory (logs) even when everything passed
# Only processes this script started are stopped: the daemons by PID, and what Slurm started for
# this lab (NHC runs), found by SLURM_CONF=<lab>/slurm.conf in its environment.
set -u
cd "$(dirname "$0")/../.." || exit 2
REPO=$(pwd -P)
BIN=${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}
case "$BIN" in /*) ;; *) BIN=$REPO/$BIN ;; esac
PORT=${SLURM_LAB_PORT:-16837}
TARBALL=$REPO/tests/integrations/nhc/lbnl-nhc-9c4a38c.tar.gz
# NHC names the node by the kernel's host name (nhcmain_init_env reads
# /proc/sys/kernel/hostname) when it calls sinfo and scontrol: the Slurm node gets that name.
NODE=$(cat /proc/sys/kernel/hostname)

die() { echo "SETUP ERROR: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (NHC, munged, slurmd)"
[ -x "$BIN" ] || die "no gdrdoctor binary at $BIN (set GDRDOCTOR_BIN)"
case "$REPO" in *[[:space:]]*) die "the repository path has a space; NHC splits check lines on spaces" ;; esac

. tests/integrations/claims.sh
# The private Slurm of part 3: slurm_install, slurm_start, slurm_stop, reason, state, wait_state.
. tests/integrations/slurm-lab.sh
slurm_ports_free
PIDS=()

LAB=$(mktemp -d /tmp/gdrdoctor-nhc.XXXXXX) || die "mktemp"
chmod 0755 "$LAB"                       # munged runs as user munge and must reach $LAB/munge
export SLURM_CONF=$LAB/slurm.conf
cleanup() {
  trap - EXIT INT TERM
  slurm_stop
  if [ "$FAILS" = 0 ] && [ "${KEEP_LAB:-0}" != 1 ]; then rm -rf "$LAB"; else echo "lab kept: $LAB"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
T0=$(now)

# 0. packages (Slurm, for part 3) ----------------------------------------------------------------
slurm_install

# 1. NHC, and gdrdoctor.nhc installed the way packaging/nhc/README.md tells sites ----------------
tar xzf "$TARBALL" -C "$LAB" || die "cannot unpack $TARBALL"
NHC=$LAB/lbnl-nhc
CONFDIR=$LAB/etc/nhc                    # a site's /etc/nhc
mkdir -p "$CONFDIR/scripts" "$LAB/log"
# NHC's own checks and its helpers, where and how its `make install` puts them (Makefile.am:
# the helpers are dist_helper_SCRIPTS, mode 0755 in $(libexecdir)/nhc; the archive has them 0644).
cp "$NHC"/scripts/*.nhc "$CONFDIR/scripts/"
HELPERDIR=$LAB/libexec/nhc
install -D -m 0755 -t "$HELPERDIR" "$NHC/helpers/node-mark-offline" "$NHC/helpers/node-mark-online"
cp packaging/nhc/gdrdoctor.nhc "$CONFDIR/scripts/gdrdoctor.nhc"
echo "NHC: $(sed -n 's/^m4_define(\[nhc_version\], \[\(.*\)\])$/\1/p' "$NHC/configure.ac") ($(zcat "$TARBALL" | git get-tar-commit-id 2>/dev/null || echo 'commit 9c4a38c'))   slurm: $(slurmctld -V)"
echo "gdrdoctor: $("$BIN" --version)   binary: $BIN"
for f in healthy-8gpu-roce acs-redirect-on-path roce-v1-only; do
  fixtures/build.sh "$f" "$LAB/fixtures/$f" >/dev/null || die "fixtures/build.sh $f"
done
FX=$LAB/fixtures

# conf LINE...: the lab's nhc.conf: one of NHC's own checks, then the lines given, the way the
# README's `echo '* || check_gdrdoctor 20' >> /etc/nhc/nhc.conf` leaves it. Replaced atomically:
# in part 3 slurmd may start NHC at any moment.
conf() {
  {
    echo "# nhc.conf: NHC's own check first, then gdrdoctor's (packaging/nhc/README.md)"
    echo "* || check_file_test -r -d /proc"
    printf '%s\n' "$@"
  } > "$CONFDIR/nhc.conf.new" && mv "$CONFDIR/nhc.conf.new" "$CONFDIR/nhc.conf"
}
# run_nhc NHC-ARGS...: NHC itself, as root, logging to standard output (-l -), without marking
# the node (MARK_OFFLINE=0: Slurm's part is part 3). Sets RC, OUT, MS.
run_nhc() {
  local s; s=$(now)
  OUT=$("$NHC/nhc" -c "$CONFDIR/nhc.conf" -D "$CONFDIR" -l - "$@" 2>&1); RC=$?
  MS=$(ms "$s")
  echo "  nhc $*: exit $RC in $MS ms${OUT:+; said: $(tr '\n' '|' <<<"$OUT")}"
}
failed_with() { [ "$OUT" = "ERROR:  nhc:  Health check failed:  $1" ]; }
gone() { for _ in $(seq 1 "$2"); do pgrep -f "$1" >/dev/null || return 0; sleep 0.25; done; return 1; }

echo "== NHC runs check_gdrdoctor: ready (fixture healthy-8gpu-roce)"
conf "* || export GDRDOCTOR=$BIN" "* || check_gdrdoctor 20 --root $FX/healthy-8gpu-roce"
run_nhc -t 30 MARK_OFFLINE=0
expect_eq "ready: nhc exits 0" "$RC" 0
expect_eq "ready: nhc says nothing" "$OUT" ""

echo "== not ready (fixture acs-redirect-on-path)"
conf "* || export GDRDOCTOR=$BIN" "* || check_gdrdoctor 20 --root $FX/acs-redirect-on-path"
run_nhc -t 30 MARK_OFFLINE=0
expect_eq "not-ready: nhc exits 1" "$RC" 1
check "not-ready: NHC's message is gdrdoctor's line" failed_with "gdrdoctor: fix-in-place(acs-redirect-on-path)"

echo "== not ready, the default deadline, the full report to GDRDOCTOR_NHC_OUTPUT (fixture roce-v1-only)"
conf "* || export GDRDOCTOR=$BIN GDRDOCTOR_NHC_OUTPUT=json:$LAB/nhc.json" "* || check_gdrdoctor --root $FX/roce-v1-only"
run_nhc -t 30 MARK_OFFLINE=0
check "default deadline: NHC's message is gdrdoctor's line" failed_with "gdrdoctor: fix-in-place(roce-v1-only)"
check "default deadline: the JSON report names roce-v1-only" grep -q '"roce-v1-only"' "$LAB/nhc.json"

echo "== could not run: no binary at GDRDOCTOR"
conf "* || export GDRDOCTOR=$LAB/no-such-gdrdoctor" "* || check_gdrdoctor 20 --root $FX/healthy-8gpu-roce"
run_nhc -t 30 MARK_OFFLINE=0
expect_eq "missing: nhc exits 1 (not a pass)" "$RC" 1
check "missing: NHC's message says gdrdoctor could not run" failed_with "gdrdoctor: could not run (exit 127)"

echo "== could not run: gdrdoctor exits 2 (a --root that is not a node)"
conf "* || export GDRDOCTOR=$BIN" "* || check_gdrdoctor 20 --root $LAB/not-a-capture"
run_nhc -t 30 MARK_OFFLINE=0
expect_eq "exit-2: nhc exits 1 (not a pass)" "$RC" 1
check "exit-2: NHC's message says gdrdoctor could not run" failed_with "gdrdoctor: could not run (exit 2)"

echo "== the deadline must fit in NHC's timeout (-t 10, deadline 20)"
conf "* || export GDRDOCTOR=$BIN" "* || check_gdrdoctor 20 --root $FX/healthy-8gpu-roce"
run_nhc -t 10 MARK_OFFLINE=0
expect_eq "timeout-fit: nhc exits 1" "$RC" 1
check "timeout-fit: NHC's message says why" \
  failed_with "check_gdrdoctor:  deadline 20s (+3s backstop) does not fit in NHC timeout 10s"

# A gdrdoctor that never answers and ignores TERM (a driver call that hangs). Deadline 1: the
# check's timeout(1) sends TERM at 4 s and KILL at 6 s, within NHC's 30 s.
HANG=$LAB/hang-gdrdoctor
printf '#!/bin/bash\ntrap "" TERM\nwhile :; do sleep 1; done\n' > "$HANG"; chmod 0755 "$HANG"
echo "== timed out: a gdrdoctor that hangs (deadline 1: TERM at 4 s, KILL at 6 s)"
conf "* || export GDRDOCTOR=$HANG" "* || check_gdrdoctor 1"
run_nhc -t 30 MARK_OFFLINE=0
expect_eq "hang: nhc exits 1 (not a pass)" "$RC" 1
check "hang: NHC's message says gdrdoctor timed out" failed_with "gdrdoctor: timed out after 4s"
check "hang: nhc ended within the backstop (<= 8 s; took $MS ms)" test "$MS" -le 8000
check "hang: the hung gdrdoctor was killed" gone "$HANG" 8

# Issue 41: a gdrdoctor that answers at once, but leaves a descendant in a session of its own that
# holds its stdout open: the check reads a file, not a pipe, and ends with the process.
ESC=$LAB/escaping-gdrdoctor
printf '#!/bin/bash\nsetsid sleep 120 &\necho "gdrdoctor: fix-in-place(acs-redirect-on-path)"\nexit 1\n' > "$ESC"; chmod 0755 "$ESC"
echo "== a descendant that left the process group holds stdout"
conf "* || export GDRDOCTOR=$ESC" "* || check_gdrdoctor 5"
run_nhc -t 30 MARK_OFFLINE=0
expect_eq "escaped descendant: nhc exits 1" "$RC" 1
check "escaped descendant: NHC's message is the line" failed_with "gdrdoctor: fix-in-place(acs-redirect-on-path)"
check "escaped descendant: nhc did not wait for it (<= 3 s; took $MS ms)" test "$MS" -le 3000
pkill -f "^sleep 120$" 2>/dev/null || true
# A line of 2 MB: filtered in its first 4 KiB, at once (the filter was quadratic on it).
BIG=$LAB/big-gdrdoctor
printf '#!/bin/bash\nprintf "gdrdoctor: fix-in-place("\nhead -c 2000000 /dev/zero | tr "\\\\0" "a"\necho ")"\nexit 1\n' > "$BIG"; chmod 0755 "$BIG"
echo "== a line of 2 MB"
conf "* || export GDRDOCTOR=$BIG" "* || check_gdrdoctor 5"
run_nhc -t 30 MARK_OFFLINE=0
expect_eq "2 MB line: nhc exits 1" "$RC" 1
check "2 MB line: nhc took under 3 s ($MS ms)" test "$MS" -le 3000
check "2 MB line: the message is bounded (250 characters)" test "${#OUT}" -le 400

# NHC's watchdog (-t) counts from NHC's start, so other checks can leave the check less time
# than its deadline: then NHC's own timeout ends the run, and it fails, naming the check.
echo "== NHC's own watchdog: another check took 3 s of -t 5, gdrdoctor hangs"
conf "* || sleep 3" "* || export GDRDOCTOR=$HANG" "* || check_gdrdoctor 1"
run_nhc -t 5 MARK_OFFLINE=0
expect_eq "watchdog: nhc exits 142 (NHC's timeout)" "$RC" 142
check "watchdog: NHC's message names the check" \
  grep -qxF 'ERROR:  nhc:  Health check failed:  Script timed out while executing "check_gdrdoctor 1".' <<<"$OUT"
check "watchdog: nhc ended by its timeout (<= 7 s; took $MS ms)" test "$MS" -le 7000
check "watchdog: the hung gdrdoctor was killed by the check's backstop" gone "$HANG" 24

# NHC's die() hands the message to node-mark-offline through eval, in single quotes. A binary
# whose line holds a quote (no gdrdoctor prints one: its line is codes) must not run code.
# OFFLINE_NODE (NHC's setting for the helper) records the arguments it gets instead of calling
# scontrol.
echo "== a reason line with a quote in it reaches node-mark-offline as data"
printf '#!/bin/sh\necho "gdrdoctor: a'"'"'; touch %s; echo '"'"'b"\nexit 1\n' "$LAB/injected" > "$LAB/quote-gdrdoctor"
printf '#!/bin/sh\nprintf "%%s\\n" "$@" > %s\n' "$LAB/offline.args" > "$LAB/record-offline"
chmod 0755 "$LAB/quote-gdrdoctor" "$LAB/record-offline"
conf "* || export GDRDOCTOR=$LAB/quote-gdrdoctor" "* || check_gdrdoctor 5"
run_nhc -t 30 NHC_RM=slurm MARK_OFFLINE=1 OFFLINE_NODE="$LAB/record-offline"
check "quote: nothing in the line ran" test ! -e "$LAB/injected"
expect_eq "quote: node-mark-offline got the node and the line without the quotes" \
  "$(tr '\n' '|' < "$LAB/offline.args" 2>/dev/null)" "$NODE|gdrdoctor: a touch ${LAB//\//}injected echo b|"

# 2. NHC's own test suite, with gdrdoctor.nhc in its scripts directory -----------------------------
# suite NAME [with-gdrdoctor] [A-fix]: a fresh copy of NHC; runs test/nhc-test as `make test` does.
suite() {
  local dir=$LAB/suite-$1; shift
  cp -a "$NHC" "$dir"
  case " $* " in *" with-gdrdoctor "*)
    cp packaging/nhc/gdrdoctor.nhc "$dir/scripts/"
    cp tests/integrations/nhc/test_gdrdoctor.nhc "$dir/test/" ;;
  esac
  case " $* " in *" A-fix "*)   # mej/nhc issue 154: tests/integrations/nhc/README.md
    sed -i 's/^    check_ps_time -u root 60m$/    check_ps_time -A -u root 60m/' "$dir/test/test_lbnl_ps.nhc" ;;
  esac
  (cd "$dir/test" && ./nhc-test . ..) > "$dir.out" 2>&1; RC=$?
  # SHUT rewrites its progress line with \r; keep the set verdicts and the failure.
  OUT=$(tr '\r' '\n' < "$dir.out" | grep -aE '\.\.\.(ok|failed [0-9/]+)$|^TEST FAILED|tests passed' | grep -avE '\.\.\.ok [0-9]+/[0-9]+$')
}
last_failure() { grep -aE '\.\.\.failed|^TEST FAILED' <<<"$OUT" | tr '\n' '|'; }
echo "== NHC's test suite as published (stops at its first failure)"
suite plain; plain_rc=$RC plain_fail=$(last_failure)
echo "  without gdrdoctor.nhc: exit $plain_rc: $plain_fail"
suite with with-gdrdoctor
echo "  with gdrdoctor.nhc:    exit $RC: $(last_failure)"
check "suite as published: fails at mej/nhc issue 154's assertion without gdrdoctor.nhc" \
  grep -q 'lbnl_ps.nhc...failed 94/116|TEST FAILED:  CPU time utilization for root-owned process >= 60m' <<<"$plain_fail"
expect_eq "suite as published: with gdrdoctor.nhc it fails at the same assertion, and only there" \
  "$RC|$(last_failure)" "$plain_rc|$plain_fail"
check "suite as published: gdrdoctor.nhc's own tests passed before it" grep -qx 'gdrdoctor.nhc...ok' <<<"$OUT"
echo "== NHC's test suite with issue 154's assertion given -A"
suite fixed with-gdrdoctor A-fix
echo "  $(tr '\n' ' ' <<<"$OUT")"
expect_eq "suite: nhc-test exits 0 with gdrdoctor.nhc in the scripts directory" "$RC" 0
all_passed() {
  grep -qx "lbnl_ps.nhc...ok" <<<"$OUT" && grep -qx "gdrdoctor.nhc...ok" <<<"$OUT" \
    && grep -qE "^All [0-9]+ tests passed" <<<"$OUT" && ! grep -q failed <<<"$OUT"
}
check "suite: every set passed, lbnl_ps.nhc and gdrdoctor.nhc included" all_passed

# 3. Slurm with NHC as its HealthCheckProgram ----------------------------------------------------
NHCLOG=$LAB/log/nhc.log
{
  echo '#!/bin/bash'
  echo '# The HealthCheckProgram: NHC with this lab in place of /etc/nhc, /usr/lib/nhc, /var/log.'
  printf 'export SLURM_CONF=%q\n' "$SLURM_CONF"
  printf 'exec %q -c %q -D %q -t 30 HELPERDIR=%q LOGFILE=%q\n' "$NHC/nhc" "$CONFDIR/nhc.conf" "$CONFDIR" \
    "$HELPERDIR" "$NHCLOG"
} > "$LAB/nhc-health"
chmod 0755 "$LAB/nhc-health"
log_mark() { MARK=$(stat -c %s "$NHCLOG" 2>/dev/null || echo 0); }
# logged TEXT: NHC's log gets TEXT after the last log_mark (a run of NHC after the change), 60 s.
logged() {
  for _ in $(seq 1 240); do
    tail -c +"$((MARK + 1))" "$NHCLOG" 2>/dev/null | grep -qF -- "$1" && return 0; sleep 0.25
  done
  return 1
}
gdr_conf() { conf "* || export GDRDOCTOR=${2:-$BIN}" "* || check_gdrdoctor 10 --root $FX/$1"; }

gdr_conf healthy-8gpu-roce
# slurmctld asks slurmd to run the program every HealthCheckInterval seconds, on a node in any
# state (HealthCheckNodeState=ANY, the default); a site runs it every few minutes.
slurm_start "HealthCheckProgram=$LAB/nhc-health" HealthCheckInterval=2 HealthCheckNodeState=ANY
echo "  scontrol show config: $(scontrol show config | grep -E '^HealthCheck' | tr -s ' ' | tr '\n' ';')"

echo "== Slurm runs NHC: not ready (fixture acs-redirect-on-path)"
log_mark; gdr_conf acs-redirect-on-path; s=$(now)
check "not-ready: NHC drained the node" wait_state drained
echo "  drained $(ms "$s") ms after the change; sinfo: $(sinfo -h -N -n "$NODE" -o '%T|%E')"
expect_eq "not-ready: the reason is NHC's leader and gdrdoctor's line" "$(reason)" "NHC: gdrdoctor: fix-in-place(acs-redirect-on-path)"
check "not-ready: through NHC's node-mark-offline (its log)" \
  logged "node-mark-offline:  Marking idle $NODE offline:  NHC: gdrdoctor: fix-in-place(acs-redirect-on-path)"

echo "== ready again: NHC resumes the node it drained"
log_mark; gdr_conf healthy-8gpu-roce; s=$(now)
check "ready: NHC resumed the node (idle)" wait_state idle
echo "  idle $(ms "$s") ms after the change"
expect_eq "ready: no reason left" "$(reason)" none
check "ready: through NHC's node-mark-online (its log)" \
  logged "node-mark-online:  Marking $NODE online and clearing note (NHC: gdrdoctor: fix-in-place(acs-redirect-on-path))"

echo "== could not run (no binary at GDRDOCTOR): drained, not passed"
log_mark; gdr_conf healthy-8gpu-roce "$LAB/no-such-gdrdoctor"
check "missing: NHC drained the node" wait_state drained
expect_eq "missing: the reason says gdrdoctor could not run" "$(reason)" "NHC: gdrdoctor: could not run (exit 127)"
log_mark; gdr_conf healthy-8gpu-roce
check "missing, then ready: NHC resumed the node" wait_state idle

# A reason NHC did not set stays, whatever the check says: an operator's, and the one
# packaging/slurm/prolog.sh sets (it drains with "gdrdoctor: <action>(<codes>) ...", no "NHC:" leader).
for other in "operator: maintenance" "gdrdoctor: fix-in-place(acs-redirect-on-path)"; do
  echo "== a reason NHC did not set: '$other'"
  scontrol update nodename="$NODE" state=drain reason="$other"
  log_mark
  check "other reason, ready: NHC left the node alone (its log)" \
    logged "node-mark-online:  Not onlining $NODE:  Down for non-NHC reason ($other)"
  expect_eq "other reason, ready: still drained with that reason" "$(state)|$(reason)" "drained|$other"
  log_mark; gdr_conf roce-v1-only
  check "other reason, not ready: node-mark-offline keeps it (its log)" \
    logged "node-mark-offline:  Marking drain $NODE offline:  $other"
  expect_eq "other reason, not ready: still drained with that reason" "$(state)|$(reason)" "drained|$other"
  gdr_conf healthy-8gpu-roce
  scontrol update nodename="$NODE" state=resume
  wait_state idle || fail "other reason: resume by hand"
done

echo "TIME total: $(ms "$T0") ms"
echo "RESULT: $PASS passed, $FAILS failed"
[ "$FAILS" = 0 ]
