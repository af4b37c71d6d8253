#!/bin/bash
# tests/integrations/slurm-jobs.sh: the job journal (issue 42) under a REAL single-node Slurm.
#
# Boots munged, slurmctld and slurmd (slurm-lab.sh, shared with slurm.sh and nhc.sh) with the
# real, unchanged packaging/slurm/{prolog,task-prolog,epilog}.sh, each through a two-line wrapper
# that sets GDRDOCTOR_DEFAULTS. The Prolog checks a captured healthy node (fixture
# healthy-8gpu-roce), so its report says ready. Jobs of several tasks then write NCCL-like lines
# (the lines NCCL 2.21 prints with NCCL_DEBUG_SUBSYS=INIT,NET,ENV) to the NCCL_DEBUG_FILE the
# TaskProlog set, replacing %h and %p as NCCL does; no NCCL runs here (the GPU machine runs the
# real one: tests/gpu-machine/jobs.sh). Claims: the Epilog's journal line and the textfile say what
# the logs say, rank by rank; a job without GDR on a node called ready is contradicted; a job that
# set its own NCCL_DEBUG_FILE is not recorded; a job without NCCL is not exercised; the logs are
# removed; `gdrdoctor jobs` ranks the node; a missing binary leaves the job and the node alone.
#
# Usage (root, from the repository root):  tests/integrations/slurm-jobs.sh
# Environment: GDRDOCTOR_BIN, SLURM_LAB_PORT (default 16837), KEEP_LAB=1 (as slurm.sh).
set -u
cd "$(dirname "$0")/../.." || exit 2
REPO=$(pwd -P)
BIN=${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}
case "$BIN" in /*) ;; *) BIN=$REPO/$BIN ;; esac
PORT=${SLURM_LAB_PORT:-16837}
NODE=$(hostname -s)

die() { echo "SETUP ERROR: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (munged, slurmd)"
[ -x "$BIN" ] || die "no gdrdoctor binary at $BIN (set GDRDOCTOR_BIN)"
case "$REPO" in *[[:space:]]*) die "the repository path has a space; GDRDOCTOR_PROLOG_ARGS splits on spaces" ;; esac

. tests/integrations/claims.sh
. tests/integrations/slurm-lab.sh
slurm_ports_free
PIDS=()

LAB=$(mktemp -d /tmp/gdrdoctor-slurm-jobs.XXXXXX) || die "mktemp"
chmod 0755 "$LAB"
fixtures/build.sh healthy-8gpu-roce "$LAB/fixtures/healthy-8gpu-roce" >/dev/null || die "fixtures/build.sh"
export SLURM_CONF=$LAB/slurm.conf
cleanup() {
  trap - EXIT INT TERM
  slurm_stop
  if [ "$FAILS" = 0 ] && [ "${KEEP_LAB:-0}" != 1 ]; then rm -rf "$LAB"; else echo "lab kept: $LAB"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
T0=$(now)

slurm_install
echo "slurm: $(slurmctld -V)   gdrdoctor: $("$BIN" --version)"

# The jobs directory as packaging/systemd/gdrdoctor-tmpfiles.conf makes it.
mkdir -p "$LAB/report" "$LAB/lib" "$LAB/textfile"
install -d -m 1777 "$LAB/jobs"
JOURNAL=$LAB/lib/jobs.jsonl
PROM=$LAB/textfile/gdrdoctor-job.prom
defaults() {   # defaults [gdrdoctor=PATH]: a missing binary lets the Prolog pass (ON_ERROR=pass)
  local bin=$BIN
  case "${1:-}" in gdrdoctor=*) bin=${1#*=} ;; esac
  {
    printf 'GDRDOCTOR=%q\n' "$bin"
    [ "$bin" = "$BIN" ] || echo 'GDRDOCTOR_ON_ERROR=pass'
    printf 'GDRDOCTOR_PROLOG_ARGS=%q\n' "--no-gdr-test --root $LAB/fixtures/healthy-8gpu-roce"
    printf 'GDRDOCTOR_REPORT_DIR=%q\n' "$LAB/report"
    printf 'GDRDOCTOR_JOBS_DIR=%q\n' "$LAB/jobs"
    printf 'GDRDOCTOR_JOURNAL=%q\n' "$JOURNAL"
    printf 'GDRDOCTOR_JOBS_RECENT=%q\n' "$LAB/lib/jobs-recent.json"
    printf 'GDRDOCTOR_TEXTFILE=%q\n' "$PROM"
  } > "$LAB/defaults.new" && mv "$LAB/defaults.new" "$LAB/defaults"
}
for s in prolog task-prolog epilog; do
  {
    echo '#!/bin/bash'
    printf 'export GDRDOCTOR_DEFAULTS=%q\n' "$LAB/defaults"
    printf 'exec %q\n' "$REPO/packaging/slurm/$s.sh"
  } > "$LAB/$s"
  chmod 0755 "$LAB/$s"
done
# A task that writes what NCCL 2.21 writes at init with the TaskProlog's settings: the version,
# the settings, the NIC, the GDR decision, and one connection per task, to the file NCCL would
# (NCCL_DEBUG_FILE with %h and %p replaced); GDR=0 leaves the connections without GDRDMA.
cat > "$LAB/nccl-task" <<'TASK'
#!/bin/bash
[ "${NCCL_DEBUG:-}" = INFO ] || { echo "task $SLURM_PROCID: NCCL_DEBUG=${NCCL_DEBUG:-unset}"; exit 0; }
f=${NCCL_DEBUG_FILE//%h/$(hostname)}; f=${f//%p/$$}
r=$SLURM_PROCID; n=$SLURM_NTASKS; h=$(hostname); suffix=; [ "${GDR:-1}" = 1 ] && suffix=/GDRDMA
{
  echo "$h:$$:$$ [$r] NCCL INFO NCCL version 2.21.5+cuda12.4"
  echo "$h:$$:$$ [$r] NCCL INFO NCCL_DEBUG_SUBSYS set by environment to ${NCCL_DEBUG_SUBSYS:-}."
  echo "$h:$$:$$ [$r] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>"
  if [ "${GDR:-1}" = 1 ]; then
    echo "$h:$$:$$ [$r] NCCL INFO GPU Direct RDMA Enabled for GPU $r / HCA 0 (distance 3 <= 4), read 1 mode Default"
  fi
  echo "$h:$$:$$ [$r] NCCL INFO Channel 00/0 : $r[$r] -> $(( (r + 1) % n ))[$(( (r + 1) % n ))] [send] via NET/IB/0$suffix"
} >> "$f"
echo "task $r wrote $f"
TASK
chmod 0755 "$LAB/nccl-task"

defaults
slurm_start "Prolog=$LAB/prolog" "TaskProlog=$LAB/task-prolog" "Epilog=$LAB/epilog" "PrologFlags=Alloc" "KillWait=5"

# journal_line JOB: the journal's line for JOB once the Epilog wrote it (waits up to 60 s).
journal_line() {
  local _
  for _ in $(seq 1 240); do
    grep -s "\"job\":\"$1\"" "$JOURNAL" && return 0
    sleep 0.25
  done
  return 1
}
field() {   # field JSON PYTHON-EXPRESSION-ON-d
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"
}
run_job() {   # run_job [sbatch options...] -- COMMAND: the job id once it ended
  local out
  # --overcommit: more tasks than the lab node's CPUs.
  out=$(timeout 120 sbatch --wait --parsable --overcommit -o "$LAB/log/job_%j.out" "$@" 2>&1); echo "${out%%;*}" | tail -n 1
}

# 1. A job of three tasks whose NCCL used GDR ------------------------------------------------------
echo "== three tasks with GDR"
j1=$(run_job -n3 --wrap "srun $LAB/nccl-task")
echo "  job $j1: $(tr '\n' ' ' < "$LAB/log/job_$j1.out")"
l1=$(journal_line "$j1") || true
echo "  journal: ${l1:0:400}"
check "gdr: the Epilog wrote the job's line" test -n "$l1"
expect_eq "gdr: status, and every task recorded" "$(field "$l1" 'd["status"], d["summary"]')" "('gdr', 'all 3 NET connections used GPUDirect RDMA')"
expect_eq "gdr: node, user" "$(field "$l1" 'd["node"], d["user"]')" "('$NODE', 'root')"
expect_eq "gdr: NCCL release" "$(field "$l1" 'd["nccl"]')" "2.21.5+cuda12.4"
expect_eq "gdr: three ranks, each over mlx5_0 with GDR" \
  "$(field "$l1" 'sorted((r["rank"], r["nic_name"], r["gdr"]) for r in d["ranks"])')" \
  "[(0, 'mlx5_0', True), (1, 'mlx5_0', True), (2, 'mlx5_0', True)]"
expect_eq "gdr: the Prolog's report was the prediction (ready)" "$(field "$l1" 'd["predicted"]["ready"], d["contradicted"]')" "(True, False)"
check "gdr: the logs and the job's directory were removed" test ! -e "$LAB/jobs/$j1"
check "gdr: the textfile has rank 2 on mlx5_0 with GDR" \
  grep -q "^gdrdoctor_job_gdr{job=\"$j1\",user=\"root\",host=\"$NODE\",rank=\"2\",gpu=\"\",nic=\"mlx5_0\",net=\"IB\",cause=\"\"} 1$" "$PROM"
check "gdr: the textfile's last job" grep -q "^gdrdoctor_last_job_info{job=\"$j1\",user=\"root\",status=\"gdr\",nccl=\"2.21.5+cuda12.4\"} 1$" "$PROM"

# 2. A job whose NCCL went without GDR on a node the Prolog called ready ---------------------------
echo "== two tasks without GDR"
j2=$(run_job -n2 --export=ALL,GDR=0 --wrap "srun $LAB/nccl-task")
l2=$(journal_line "$j2") || true
echo "  journal: ${l2:0:400}"
expect_eq "no-gdr: status" "$(field "$l2" 'd["status"]')" no-gdr
expect_eq "no-gdr: contradicted (the check said ready)" "$(field "$l2" 'd["contradicted"]')" True
check "no-gdr: the textfile says 0 for rank 1" grep -q "^gdrdoctor_job_gdr{job=\"$j2\".*rank=\"1\".*} 0$" "$PROM"
check "no-gdr: the textfile says contradicted" grep -qx "gdrdoctor_last_job_contradicted 1" "$PROM"

# 3. A job that set its own NCCL_DEBUG_FILE ---------------------------------------------------------
echo "== a job with its own NCCL_DEBUG_FILE"
j3=$(run_job -n2 --export=ALL,NCCL_DEBUG_FILE=/tmp/own.%h.%p --wrap "srun $LAB/nccl-task")
l3=$(journal_line "$j3") || true
expect_eq "own file: not recorded, and why" "$(field "$l3" 'd["status"], d["summary"]')" \
  "('not-recorded', 'not recorded: the job set NCCL_DEBUG_FILE')"
check "own file: the job kept its own setting (no log in the jobs directory)" test ! -e "$LAB/jobs/$j3"

# 4. A job without NCCL ------------------------------------------------------------------------------
echo "== a job without NCCL"
j4=$(run_job -n1 --wrap "srun true")
l4=$(journal_line "$j4") || true
expect_eq "no NCCL: not exercised, never no GDR" "$(field "$l4" 'd["status"]')" no-nccl

# 5. gdrdoctor jobs over the journal ------------------------------------------------------------------
out=$("$BIN" jobs --format csv "$JOURNAL"); rc=$?
printf '  %s\n' "$out"
expect_eq "jobs: exit 1 (a job went without GDR)" "$rc" 1
check "jobs: the node's row: 2 exercised, 1 with GDR, 1 without, 1 contradicted, 1 not exercised, 1 not recorded" \
  grep -q "^node,$NODE,,2,1,1,1,1,1," <<<"$out"

# 6. A missing binary: the job runs, the node stays up, the journal says why -------------------------
echo "== gdrdoctor missing"
defaults gdrdoctor="$LAB/no-such-gdrdoctor"
j6=$(run_job -n2 --wrap "srun $LAB/nccl-task")
check "missing binary: the job's tasks ran" grep -q "task 1 wrote" "$LAB/log/job_$j6.out"
l6=$(journal_line "$j6") || true
expect_eq "missing binary: the journal says why" "$(field "$l6" 'd["status"], "exit 127" in d["summary"]')" "('error', True)"
expect_eq "missing binary: the node is not drained" "$(state)" idle
check "missing binary: the logs were removed all the same" test ! -e "$LAB/jobs/$j6"
# 7. The job-history check on the node as the Epilog left it: the newest job that used the
# network (job 2) went without GDR where the Prolog had said ready.
mkdir -p "$LAB/fixtures/healthy-8gpu-roce/var/lib/gdrdoctor"
cp "$LAB/lib/jobs-recent.json" "$LAB/fixtures/healthy-8gpu-roce/var/lib/gdrdoctor/" 2>/dev/null
out=$("$BIN" --root "$LAB/fixtures/healthy-8gpu-roce" check --select job-history --format json)
expect_eq "job-history: the Epilog's recent jobs make the check warn jobs-without-gdr on job $j2" \
  "$(field "$out" '[(f["code"], f["status"], "job '"$j2"' at" in f["message"]) for c in d["checks"] if c["id"] == "job-history" for f in c["findings"]]')" \
  "[('jobs-without-gdr', 'warn', True)]"
check "the journal is whole JSON lines" python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$JOURNAL"

echo "TIME total: $(ms "$T0") ms"
echo "RESULT: $PASS passed, $FAILS failed"
[ "$FAILS" = 0 ]
