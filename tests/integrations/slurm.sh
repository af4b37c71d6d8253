#!/bin/bash
# tests/integrations/slurm.sh: packaging/slurm/prolog.sh as the Prolog of a REAL single-node Slurm.
#
# Boots munged, slurmctld and slurmd (Debian's slurm-wlm, installed with apt when missing) under a
# private directory (slurm-lab.sh, shared with nhc.sh), with Prolog= pointing at a two-line wrapper that sets GDRDOCTOR_DEFAULTS and
# execs the real, unchanged packaging/slurm/prolog.sh. The defaults file points gdrdoctor at a
# captured node (a fixture, made a directory by fixtures/build.sh) through
# GDRDOCTOR_PROLOG_ARGS="--root ..."; switching the fixture means rewriting that file. Each assertion prints one PASS/FAIL line; the exit status is 1 when any
# failed, 2 when the lab could not be set up.
# Step 11 runs `gdr-test --slurm` as two tasks of one srun step on this node: the pairing from
# Slurm's environment and the protocol over loopback TCP are real; the RDMA part is stubbed (the
# stand-in libibverbs, tests/stubs/ibverbs.c; real rxe between two kernels is the lab's two-node
# scenario). It needs cc, libibverbs' headers, and ports 18516-18517 free.
#
# Usage (root, from the repository root):
#   tests/integrations/slurm.sh
#   GDRDOCTOR_BIN=/path/to/gdrdoctor tests/integrations/slurm.sh
# Environment:
#   GDRDOCTOR_BIN   the gdrdoctor binary (default ${CARGO_TARGET_DIR:-target}/release/gdrdoctor,
#                   relative to the repository root)
#   PROLOG_FLAGS    slurm.conf PrologFlags (default Alloc; empty for Slurm's default)
#   SLURM_LAB_PORT  slurmctld port; slurmd uses the next one (default 16827)
#   KEEP_LAB=1      keep the lab directory (logs) even when everything passed
# Only processes this script started are stopped: the daemons by PID, and anything that Slurm
# started for this lab (prologs, job steps), found by SLURM_CONF=<lab>/slurm.conf in its environment.
set -u
cd "$(dirname "$0")/../.." || exit 2
REPO=$(pwd -P)
BIN=${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}
case "$BIN" in /*) ;; *) BIN=$REPO/$BIN ;; esac
PROLOG_FLAGS=${PROLOG_FLAGS-Alloc}
PORT=${SLURM_LAB_PORT:-16827}
NODE=$(hostname -s)

die() { echo "SETUP ERROR: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (munged, slurmd)"
[ -x "$BIN" ] || die "no gdrdoctor binary at $BIN (set GDRDOCTOR_BIN)"
case "$REPO" in *[[:space:]]*) die "the repository path has a space; GDRDOCTOR_PROLOG_ARGS splits on spaces" ;; esac

. tests/integrations/claims.sh
. tests/integrations/slurm-lab.sh
slurm_ports_free
PIDS=(); ESCAPED=

LAB=$(mktemp -d /tmp/gdrdoctor-slurm.XXXXXX) || die "mktemp"
chmod 0755 "$LAB"                       # munged runs as user munge and must reach $LAB/munge
# The captured nodes the prolog checks, as directories (generated, not committed:
# fixtures/README.md).
for f in healthy-8gpu-roce acs-redirect-on-path roce-v1-only; do
  fixtures/build.sh "$f" "$LAB/fixtures/$f" >/dev/null || die "fixtures/build.sh $f"
done
export SLURM_CONF=$LAB/slurm.conf

# The private Slurm: slurm_install, slurm_start, slurm_stop, reason, state, wait_state.
cleanup() {
  local jobs=()
  trap - EXIT INT TERM
  if [ ${#PIDS[@]} -gt 1 ]; then
    read -r -a jobs <<<"$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')"
    [ ${#jobs[@]} -gt 0 ] && timeout 5 scancel --quiet "${jobs[@]}" 2>/dev/null
  fi
  [ -n "$ESCAPED" ] && PIDS+=("$ESCAPED")
  slurm_stop
  if [ "$FAILS" = 0 ] && [ "${KEEP_LAB:-0}" != 1 ]; then rm -rf "$LAB"; else echo "lab kept: $LAB"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
T0=$(now)

# 1. packages -----------------------------------------------------------------------------------
slurm_install
echo "slurm: $(slurmctld -V)   gdrdoctor: $("$BIN" --version)   binary: $BIN"

# 2. the Prolog wrapper and the defaults file -----------------------------------------------------
mkdir -p "$LAB/report"
{
  echo '#!/bin/bash'
  printf 'export GDRDOCTOR_DEFAULTS=%q\n' "$LAB/defaults"
  printf 'exec %q\n' "$REPO/packaging/slurm/prolog.sh"
} > "$LAB/prolog"
chmod 0755 "$LAB/prolog"

# defaults fixture=NAME [gdrdoctor=PATH] [on_error=drain|pass] [deadline=N]
defaults() {
  local fixture='' bin=$BIN on_error='' deadline=10 kv
  for kv in "$@"; do
    case "$kv" in
      fixture=*) fixture=${kv#*=} ;; gdrdoctor=*) bin=${kv#*=} ;;
      on_error=*) on_error=${kv#*=} ;; deadline=*) deadline=${kv#*=} ;;
    esac
  done
  {
    printf 'GDRDOCTOR=%q\n' "$bin"
    printf 'GDRDOCTOR_PROLOG_DEADLINE=%q\n' "$deadline"
    printf 'GDRDOCTOR_PROLOG_ARGS=%q\n' "--no-gdr-test --root $LAB/fixtures/$fixture"
    [ -n "$on_error" ] && printf 'GDRDOCTOR_ON_ERROR=%q\n' "$on_error"
    printf 'GDRDOCTOR_REPORT_DIR=%q\n' "$LAB/report"
  } > "$LAB/defaults.new" && mv "$LAB/defaults.new" "$LAB/defaults"
}

lacks_line() { ! grep -qxF "$1" <<<"$2"; }
not_running() { ! pgrep -f "$1" >/dev/null; }
resume() { scontrol update nodename="$NODE" state=resume; wait_state idle; }
report_is() {   # report_is ready|not-ready [code]: the JSON report of the last prolog run
  python3 - "$LAB/report/prolog.json" "$1" "${2:-}" <<'PY'
import json, sys
path, want, code = sys.argv[1:4]
d = json.load(open(path))
v = d["verdict"]
ok = v["ready"] == (want == "ready")
if code:
    ok = ok and any(code in b.get("codes", []) for b in v.get("blocking", []))
sys.exit(0 if ok else 1)
PY
}
# run_prolog: the wrapper by hand, as slurmd would (a drained node gets no jobs). Sets RC, MS, ERR.
run_prolog() {
  local s; s=$(now)
  ERR=$(SLURMD_NODENAME=$NODE SLURM_JOB_ID=manual "$LAB/prolog" 2>&1 >/dev/null); RC=$?
  MS=$(ms "$s")
  echo "  prolog by hand: exit $RC in $MS ms${ERR:+; said: $ERR}"
}

# 3-4. munged, slurm.conf with the Prolog, the daemons (slurm-lab.sh) ------------------------------
defaults fixture=healthy-8gpu-roce
echo "PrologFlags=${PROLOG_FLAGS:-<default>}"
slurm_start "Prolog=$LAB/prolog" "${PROLOG_FLAGS:+PrologFlags=$PROLOG_FLAGS}" "KillWait=5"

# 5. failing check: the job does not run, the node is drained with gdrdoctor's line --------------
echo "== not ready (fixture acs-redirect-on-path)"
defaults fixture=acs-redirect-on-path
s=$(now); out=$(timeout 60 srun -N1 hostname 2>&1); rc=$?
echo "  srun exit $rc in $(ms "$s") ms: $(tr '\n' ' ' <<<"$out")"
check "not-ready: srun -N1 hostname fails" test "$rc" -ne 0
check "not-ready: srun did not run hostname" lacks_line "$NODE" "$out"
check "not-ready: node drained" wait_state drained 120
expect_eq "not-ready: reason is gdrdoctor's line" "$(reason)" "gdrdoctor: fix-in-place(acs-redirect-on-path)"
echo "  sinfo -N -n $NODE -o '%T|%E': $(sinfo -h -N -n "$NODE" -o '%T|%E')"
check "not-ready: JSON report written (ready=false, acs-redirect-on-path)" report_is not-ready acs-redirect-on-path

resume
rm -f "$LAB/report/prolog.json"
jb=$(sbatch --parsable -o "$LAB/log/job_%j.out" --wrap 'echo payload-ran')
st=
for _ in $(seq 1 240); do
  st=$(squeue -h -j "$jb" -o '%T|%r'); [ "$st" = "PENDING|launch failed requeued held" ] && break; sleep 0.25
done
echo "  sbatch job $jb: $st"
expect_eq "not-ready: sbatch job requeued and held" "$st" "PENDING|launch failed requeued held"
check "not-ready: sbatch payload did not run" lacks_line payload-ran "$(cat "$LAB/log/job_$jb.out" 2>/dev/null)"
check "not-ready: node drained again (sbatch)" wait_state drained 120
expect_eq "not-ready: reason is gdrdoctor's line (sbatch)" "$(reason)" "gdrdoctor: fix-in-place(acs-redirect-on-path)"
scancel "$jb"

# 6. resume with a ready node: jobs run --------------------------------------------------------
echo "== ready (fixture healthy-8gpu-roce)"
defaults fixture=healthy-8gpu-roce
check "ready: resume -> idle" resume
s=$(now); out=$(timeout 60 srun -N1 hostname 2>&1); rc=$?
echo "  srun exit $rc in $(ms "$s") ms: $(tr '\n' ' ' <<<"$out")"
expect_eq "ready: srun -N1 hostname prints the host name" "$out" "$NODE"
s=$(now); jb=$(timeout 60 sbatch --wait --parsable -o "$LAB/log/job_%j.out" --wrap 'echo payload-ran'); rc=$?
echo "  sbatch --wait exit $rc in $(ms "$s") ms"
expect_eq "ready: sbatch --wait completes" "$rc" 0
check "ready: sbatch payload ran" grep -qs payload-ran "$LAB/log/job_${jb%%;*}.out"
expect_eq "ready: node still idle" "$(state)" idle
expect_eq "ready: no reason" "$(reason)" none
check "ready: JSON report written (ready=true)" report_is ready

# 7. an operator's reason is kept -----------------------------------------------------------------
echo "== operator reason first"
scontrol update nodename="$NODE" state=drain reason="operator: maintenance"
defaults fixture=acs-redirect-on-path
run_prolog
expect_eq "operator: prolog exits 1" "$RC" 1
expect_eq "operator: reason kept" "$(reason)" "operator: maintenance"
echo "  prolog wall time (not ready, reason kept): $MS ms"

# 8. a reason gdrdoctor set earlier is replaced ---------------------------------------------------
echo "== gdrdoctor reason replaced"
resume
run_prolog
expect_eq "replace: first run drains with acs-redirect-on-path" "$(reason)" "gdrdoctor: fix-in-place(acs-redirect-on-path)"
echo "  prolog wall time (not ready, drain): $MS ms"
defaults fixture=roce-v1-only
run_prolog
expect_eq "replace: prolog exits 1" "$RC" 1
expect_eq "replace: reason replaced by the new finding" "$(reason)" "gdrdoctor: fix-in-place(roce-v1-only)"
echo "  prolog wall time (not ready, replace): $MS ms"

# 9. GDRDOCTOR_ON_ERROR ------------------------------------------------------------------------
echo "== could not run (GDRDOCTOR=$LAB/no-such-gdrdoctor)"
resume
defaults fixture=healthy-8gpu-roce gdrdoctor="$LAB/no-such-gdrdoctor"   # ON_ERROR unset: drain
run_prolog
expect_eq "on-error=drain (default): prolog exits 1" "$RC" 1
expect_eq "on-error=drain (default): reason" "$(reason)" "gdrdoctor: could not run (exit 127)"
resume
defaults fixture=healthy-8gpu-roce gdrdoctor="$LAB/no-such-gdrdoctor" on_error=pass
run_prolog
expect_eq "on-error=pass: prolog exits 0" "$RC" 0
out=$(timeout 60 srun -N1 hostname 2>&1)
expect_eq "on-error=pass: srun runs the job" "$out" "$NODE"
expect_eq "on-error=pass: node not drained" "$(state)|$(reason)" "idle|none"

# 10. the deadline backstop ---------------------------------------------------------------------
# A stand-in that never answers: it ignores TERM, and leaves a descendant in a session of its own
# that holds stdout open (timeout(1) cannot reach it). deadline=1: TERM at 4 s, KILL at 6 s.
echo "== deadline backstop (a gdrdoctor that hangs)"
cat > "$LAB/hang-gdrdoctor" <<EOF
#!/bin/bash
setsid sleep 300 & echo \$! > $LAB/escaped.pid
trap '' TERM
while :; do sleep 1; done
EOF
chmod 0755 "$LAB/hang-gdrdoctor"
defaults fixture=healthy-8gpu-roce gdrdoctor="$LAB/hang-gdrdoctor" deadline=1
run_prolog
ESCAPED=$(cat "$LAB/escaped.pid" 2>/dev/null)
expect_eq "deadline: prolog exits 1" "$RC" 1
check "deadline: prolog ended within deadline+backstop (<= 8 s; took $MS ms)" test "$MS" -le 8000
check "deadline: prolog waited for the deadline (>= 4 s)" test "$MS" -ge 4000
expect_eq "deadline: reason" "$(reason)" "gdrdoctor: timed out after 4s"
check "deadline: the hung gdrdoctor was killed" not_running "$LAB/hang-gdrdoctor"
echo "  prolog wall time (hung gdrdoctor): $MS ms"
if [ -n "$ESCAPED" ] && kill "$ESCAPED" 2>/dev/null; then
  echo "  the escaped descendant ($ESCAPED) outlived the prolog as expected; stopped by the test"
fi
resume

# 10b. the status is the process's, the reason only what a reason needs (issue 41) -------------
# A stand-in that prints the marker line the prolog once read its status from, then fails: the
# prolog drains. A reason of quotes, $( ), backticks and a bidi control in UTF-8 reaches
# scontrol without them.
echo "== a forged status line, and a reason of shell and bidi characters"
cat > "$LAB/forge-gdrdoctor" <<'FORGE'
#!/bin/bash
printf '%s \342\200\256evil\n' "gdrdoctor: fix-in-place(x) '\$(touch /tmp/gdrdoctor-pwned)\`id\`'"
printf 'gdrdoctor-prolog-exit=0\n'
exit 1
FORGE
chmod 0755 "$LAB/forge-gdrdoctor"
resume
defaults fixture=healthy-8gpu-roce gdrdoctor="$LAB/forge-gdrdoctor"
run_prolog
expect_eq "forged status line: prolog exits 1 (the process failed)" "$RC" 1
expect_eq "hostile reason: only a reason's characters kept" "$(reason)" "gdrdoctor: fix-in-place(x) (touch tmpgdrdoctor-pwned)id evil"
check "hostile reason: nothing ran" test ! -e /tmp/gdrdoctor-pwned
resume

# 11. gdr-test --slurm: two tasks of one srun step pair themselves ------------------------------
# The launcher's pairing under real Slurm: srun gives the two tasks SLURM_PROCID 0 and 1 and a
# node list of this one node; task 0 listens on 18516, task 1 connects to it over loopback TCP and
# both authenticate with the token. THE RDMA PART IS STUBBED HERE: GDRDOCTOR_LIBIBVERBS points at
# the project's stand-in libibverbs (tests/stubs/ibverbs.c, built as tests/twonode.rs builds it),
# whose WRITEs are memcpy inside one process, so between two tasks the writer's completion is a
# remote access error, explained. That error shows that both tasks got past the handshake and
# through the verbs path; RDMA WRITEs between two kernels over real RoCE v2 (rxe) are the lab's
# two-node scenario (tests/lab/README.md), not this step.
echo "== gdr-test --slurm: srun -N1 -n2, loopback TCP, RDMA stubbed (stand-in libibverbs)"
defaults fixture=healthy-8gpu-roce          # the prolog runs for this allocation too
GDR=$LAB/gdr; mkdir -p "$GDR"
gdr_port_free=1
for p in 18516 18517; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then gdr_port_free=; fi
done
# gdr_judge DIR SRUN_RC SRUN_ERR handshake|auth: each task's JSON report (srun's %t output
# files) against the exit codes srun reported per task and its own. One line per claim,
# "ok|no" "|claim|detail", which gdr_report turns into PASS/FAIL lines.
gdr_judge() {
  python3 - "$@" <<'PY'
import json, re, sys
d, srun_rc, srun_err, want = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def say(ok, claim, detail=""):
    print(("ok" if ok else "no") + "|" + claim + "|" + str(detail).replace("\n", " "))
reps = {}
for t in (0, 1):
    try:
        reps[t] = json.load(open(f"{d}/task{t}.json"))
    except Exception as e:
        reps[t] = None
        say(False, f"task {t} wrote its JSON report", f"{d}/task{t}.json: {e}")
if None in reps.values():
    sys.exit(0)
say(True, "both tasks ran and wrote a JSON report")
r0, r1 = reps[0], reps[1]
say((r0["role"], r1["role"]) == ("listener", "connector"),
    "task 0 listened, task 1 connected (roles)", f'{r0["role"]}, {r1["role"]}')
say(str(r1.get("peer_addr")).endswith(":18516"),
    "task 1 connected to task 0's port (18516 + rank 0)", r1.get("peer_addr"))
def code(r):   # Report::exit_code, from the report
    if r.get("error") or not r["rails"]:
        return 2
    bad = [x for x in r["rails"] for k in ("outgoing", "incoming") if (x.get(k) or {}).get("failure")]
    return 1 if bad else 0
# srun names the tasks that exited non-zero, those with one code together:
# "srun: error: HOST: task 1: Exited with exit code 2", "... tasks 0-1: Exited with exit code 1".
per = {}
for ts, c in re.findall(r"tasks? ([0-9,-]+): Exited with exit code (\d+)", open(srun_err).read()):
    for part in ts.split(","):
        lo, _, hi = part.partition("-")
        for t in range(int(lo), int(hi or lo) + 1):
            per[t] = int(c)
codes = {t: per.get(t, 0) for t in (0, 1)}
say(codes == {t: code(reps[t]) for t in (0, 1)},
    "each task's exit code (srun's stderr) is its report's", f"srun says {codes}")
say(srun_rc == max(codes.values()), "srun's exit code is the worst task's",
    f"srun exit {srun_rc}, tasks {codes}")
if want == "handshake":
    for t, r in reps.items():
        say(r.get("error") is None and r.get("error_class") is None,
            f"task {t}: handshake succeeded (no control-connection error)",
            f'{r.get("error_class")}: {r.get("error")}')
    rail = r1["rails"][0] if r1["rails"] else {}
    msg = ((rail.get("outgoing") or {}).get("failure") or {}).get("message", "")
    say("IBV_WC_REM_ACCESS_ERR" in msg and "refused the WRITE into its buffer" in msg,
        "task 1 reached the RDMA stage: the stand-in's remote access error, explained", msg[:160])
    say((rail.get("setup") or {}).get("path") == "host", "task 1 registered host memory (--memory host)",
        (rail.get("setup") or {}).get("path"))
else:
    for t, r in reps.items():
        say(r.get("error_class") == "auth" and not r["rails"],
            f"task {t}: refused with the auth error, no rail tested", f'{r.get("error_class")}: {r.get("error")}')
    say("different tokens" in (r1.get("error") or ""), "the connector says the tokens differ", r1.get("error"))
PY
}
gdr_report() {   # gdr_report PREFIX DIR SRUN_RC SRUN_ERR handshake|auth
  local prefix=$1 ok claim detail f; shift
  while IFS='|' read -r ok claim detail; do
    if [ "$ok" = ok ]; then pass "$prefix: $claim"; else fail "$prefix: $claim" "$detail"; fi
  done < <(gdr_judge "$@")
  for f in "$1"/task0.json "$1"/task1.json; do
    [ -s "$f" ] && echo "  $(basename "$f"): $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
f = ((r["rails"][0].get("outgoing") or {}).get("failure") or {}) if r["rails"] else {}
print("role=%s peer_addr=%s error_class=%s error=%s outgoing=%s" % (r["role"], r.get("peer_addr"),
      r.get("error_class"), r.get("error"), f.get("message", "")[:110]))' "$f" 2>&1)"
  done
}
if ! cc -shared -fPIC -Wall -Werror -o "$GDR/libibverbs-stub.so" tests/stubs/ibverbs.c 2>"$GDR/cc.err"; then
  fail "gdr-slurm: build the stand-in libibverbs" "$(head -n 3 "$GDR/cc.err" | tr '\n' ' ')"
elif [ -z "$gdr_port_free" ]; then
  fail "gdr-slurm: port 18516/18517 free (gdr-test --slurm listens on 18516 + rank)" "in use"
else
  # A token file others cannot read (gdrdoctor refuses one they can, as ssh does a key).
  (umask 077 && head -c 32 /dev/urandom | base64 > "$GDR/token")
  # srun passes this environment to both tasks (--export=ALL, its default).
  export GDRDOCTOR_LIBIBVERBS=$GDR/libibverbs-stub.so
  unset NCCL_IB_HCA

  # The command an operator runs, with srun's per-task output files (%t: the task's rank).
  mkdir -p "$GDR/ok"
  s=$(now)
  timeout 120 srun -N1 -n2 --ntasks-per-node=2 --output="$GDR/ok/task%t.json" --error="$GDR/ok/task%t.err" \
    "$BIN" gdr-test --slurm --token-file "$GDR/token" --rails fake0 --memory host --size 64K \
    --format json --wait 30 2>"$GDR/ok/srun.err"; rc=$?
  echo "  srun exit $rc in $(ms "$s") ms; srun said: $(tr '\n' ' ' < "$GDR/ok/srun.err")"
  gdr_report "gdr-slurm" "$GDR/ok" "$rc" "$GDR/ok/srun.err" handshake

  # A wrong token in one task's file: --multi-prog gives each task its own arguments (%t is the
  # rank), so task 1 reads a token that task 0 does not have. Both must end with the auth error.
  mkdir -p "$GDR/auth"
  cp "$GDR/token" "$GDR/auth/token.0"
  (umask 077 && head -c 32 /dev/urandom | base64 > "$GDR/auth/token.1")
  printf '0-1 %s gdr-test --slurm --token-file %s --rails fake0 --memory host --format json --wait 30\n' \
    "$BIN" "$GDR/auth/token.%t" > "$GDR/auth/multi.conf"
  s=$(now)
  timeout 120 srun -N1 -n2 --ntasks-per-node=2 --output="$GDR/auth/task%t.json" --error="$GDR/auth/task%t.err" \
    --multi-prog "$GDR/auth/multi.conf" 2>"$GDR/auth/srun.err"; rc=$?
  MS=$(ms "$s")
  echo "  srun (task 1 with another token) exit $rc in $MS ms; srun said: $(tr '\n' ' ' < "$GDR/auth/srun.err")"
  gdr_report "gdr-slurm wrong token" "$GDR/auth" "$rc" "$GDR/auth/srun.err" auth
  check "gdr-slurm wrong token: the step ended within 15 s (one peer, then the end; took $MS ms)" test "$MS" -le 15000

  # Different exit codes: task 1 exits 0 at once without connecting (/bin/true), task 0 waits
  # for its peer until --wait and ends with 2. srun's exit code must be the worse one, 2.
  mkdir -p "$GDR/alone"
  {
    printf '0 %s gdr-test --slurm --token-file %s --rails fake0 --memory host --format json --wait 3\n' "$BIN" "$GDR/token"
    echo '1 /bin/true'
  } > "$GDR/alone/multi.conf"
  s=$(now)
  timeout 120 srun -N1 -n2 --ntasks-per-node=2 --output="$GDR/alone/task%t.json" --error="$GDR/alone/task%t.err" \
    --multi-prog "$GDR/alone/multi.conf" 2>"$GDR/alone/srun.err"; rc=$?
  MS=$(ms "$s")
  echo "  srun (task 1 never connects) exit $rc in $MS ms; srun said: $(tr '\n' ' ' < "$GDR/alone/srun.err")"
  expect_eq "gdr-slurm peer never came: srun's exit code is the worse task's (0 and 2)" "$rc" 2
  check "gdr-slurm peer never came: srun names task 0 alone with exit code 2" \
    grep -qE 'task 0: Exited with exit code 2' "$GDR/alone/srun.err"
  check "gdr-slurm peer never came: task 0's report names the error, no rail tested" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("  task0.json: role=%s error_class=%s error=%s" % (r["role"], r.get("error_class"), r.get("error")))
sys.exit(0 if r["role"] == "listener" and r.get("error") and not r["rails"] else 1)' "$GDR/alone/task0.json"
  unset GDRDOCTOR_LIBIBVERBS
fi

echo "TIME total: $(ms "$T0") ms"
echo "RESULT: $PASS passed, $FAILS failed (PrologFlags=${PROLOG_FLAGS:-<default>})"
[ "$FAILS" = 0 ]
