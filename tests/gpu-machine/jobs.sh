#!/usr/bin/env bash
# Issue 42 on the GPU machine (no RDMA NIC; 1, 2 or 4 GPUs): a real NCCL job (PyTorch's, through
# tests/gpu-machine/nccl-job.py: min(2, GPUs) ranks, P2P and SHM off with two, so they talk over
# NCCL's network, NCCL_NVLS_ENABLE=0) run with the environment the real Slurm TaskProlog
# (packaging/slurm/task-prolog.sh) prints; the real Epilog (packaging/slurm/epilog.sh) makes its
# journal line. Claims:
#  - the TaskProlog's settings reach NCCL: one log per rank, named by host and pid as NCCL does;
#  - the journal line says what `gdrdoctor nccl explain` says on the same logs (status from the
#    verdict, NET connections with and without GDR, the NCCL release) and agrees with `gdrdoctor
#    nccl verify` on this machine (GDR used or not, the network);
#  - the cost: communicator init (a new group and its first all-reduce) with and without the
#    settings, interleaved A/B over fresh processes, and the log bytes per rank: printed for
#    BENCHMARKS.md (targets: under 2% of init, under 100 KiB per rank).
# Prints PASS/FAIL per claim and exits with the number of failed claims. Output under $OUT.
# Usage: jobs.sh [BINARY]   (default target/release/gdrdoctor)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
bin=$(realpath "${1:-target/release/gdrdoctor}")
out=${OUT:-/tmp/gdrdoctor-jobs}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
failed=0
claim() { if [ "$1" = 0 ]; then echo "PASS $2"; else echo "FAIL $2"; failed=$((failed + 1)); fi; }

echo "== machine"
nvidia-smi -L || true
"$bin" --version
spool=$(mktemp -d)
install -d -m 1777 "$spool/jobs"
mkdir -p "$spool/lib" "$spool/run"
cat > "$spool/defaults" <<EOF
GDRDOCTOR=$bin
GDRDOCTOR_JOBS_DIR=$spool/jobs
GDRDOCTOR_JOURNAL=$spool/lib/jobs.jsonl
GDRDOCTOR_JOBS_RECENT=$spool/lib/jobs-recent.json
GDRDOCTOR_TEXTFILE=$out/gdrdoctor-job.prom
GDRDOCTOR_REPORT_DIR=$spool/run
EOF
# The Prolog's prediction: this node's own check (no RDMA NIC: not ready).
"$bin" check --no-gdr-test --format reason --output "json:$spool/run/prolog.json" > "$out/prolog.reason" 2>&1
echo "prolog: $(cat "$out/prolog.reason")"

# task_env JOB: the TaskProlog's exports for JOB, as Slurm would set them.
task_env() { SLURM_JOB_ID=$1 GDRDOCTOR_DEFAULTS=$spool/defaults bash packaging/slurm/task-prolog.sh; }

echo "== a job with the TaskProlog's environment"
task_env 4242 > "$out/task-prolog.out"
cat "$out/task-prolog.out"
( eval "$(cat "$out/task-prolog.out")"; python3 tests/gpu-machine/nccl-job.py 1 29511 ) > "$out/job.json" 2> "$out/job.err"
claim $? "the job ran ($(head -c 300 "$out/job.json"))"
mkdir -p "$out/logs"
cp "$spool/jobs/4242/"* "$out/logs/" 2>/dev/null
world=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["world"])' "$out/job.json" 2>/dev/null || echo 0)
nlogs=$(find "$out/logs" -name "nccl.$(hostname).*.log" | wc -l)
[ "$nlogs" -ge "$world" ] && [ "$world" -gt 0 ]
claim $? "one log per rank, named as NCCL names %h.%p ($nlogs logs, $world ranks)"
SLURM_JOB_ID=4242 SLURM_JOB_USER=$(id -un) SLURMD_NODENAME=$(hostname -s) GDRDOCTOR_DEFAULTS=$spool/defaults \
  bash packaging/slurm/epilog.sh 2> "$out/epilog.err"
claim $? "the Epilog exited 0 ($(cat "$out/epilog.err"))"
cp "$spool/lib/jobs.jsonl" "$out/jobs.jsonl"
[ ! -e "$spool/jobs/4242" ]
claim $? "the Epilog removed the job's logs"
"$bin" nccl explain --format json "$out"/logs/nccl.*.log > "$out/explain.json"; echo $? > "$out/explain.rc"
"$bin" nccl verify --format json > "$out/verify.json"; echo $? > "$out/verify.rc"
python3 - "$out" > "$out/judged" 2>&1 <<'PY'
import json, sys
out = sys.argv[1]
line = json.loads(open(f"{out}/jobs.jsonl").read().splitlines()[-1])
e = json.load(open(f"{out}/explain.json"))
v = json.load(open(f"{out}/verify.json"))
rc = int(open(f"{out}/explain.rc").read())
ver = e["verdict"]
print("journal:", json.dumps({k: line[k] for k in ("status", "summary", "nccl", "connections", "contradicted")}))
print("explain:", rc, ver["summary"])
print("verify:", v["answer"]["text"])
want = {0: "gdr", 3: "not-exercised"}.get(rc)
if rc == 1:
    want = "not-exercised" if ver["net_connections"] == 0 else ("no-gdr" if ver["with_gdr"] == 0 else "partial")
ok = lambda c, t: print(("PASS " if c else "FAIL ") + t)
ok(line["status"] == want, f"the journal's status {line['status']} is nccl explain's verdict (exit {rc}: {want})")
ok((line["connections"]["net"], line["connections"]["gdr"]) == (ver["net_connections"], ver["with_gdr"]),
   f"the journal's NET connections {line['connections']} are nccl explain's")
versions = {n["nccl"]["version"] for n in e["nodes"] if n["nccl"]["version"]}
ok(line["nccl"] in versions, f"the journal's NCCL {line['nccl']} is the log's {sorted(versions)}")
uses = v["answer"]["uses_gdr"]
gdr_job = line["status"] == "gdr"
ok(uses is not True or gdr_job, f"nccl verify's uses_gdr={uses} agrees with the job ({line['status']})")
ok(not gdr_job, "no GDR without an RDMA NIC: the job is not recorded as gdr")
if line["connections"]["net"]:
    nets = {r["net"] for r in line["ranks"]}
    ok(nets == {v["answer"]["network"]}, f"the ranks' network {sorted(nets)} is nccl verify's {v['answer']['network']}")
PY
while IFS= read -r l; do
  case $l in PASS\ *) claim 0 "${l#PASS }" ;; FAIL\ *) claim 1 "${l#FAIL }" ;; *) echo "  $l" ;; esac
done < "$out/judged"

echo "== cost of the settings on NCCL's init (A: none, B: the TaskProlog's), interleaved"
n=${INITS:-10}
rounds=${ROUNDS:-3}
for round in $(seq 1 "$rounds"); do
  python3 tests/gpu-machine/nccl-job.py "$n" $((29520 + round)) > "$out/cost-A-$round.json" 2>> "$out/cost.err"
  task_env $((5000 + round)) > "$out/env-$round"
  ( eval "$(cat "$out/env-$round")"; python3 tests/gpu-machine/nccl-job.py "$n" $((29530 + round)) ) \
    > "$out/cost-B-$round.json" 2>> "$out/cost.err"
  du -b "$spool/jobs/$((5000 + round))"/nccl.* | awk '{s+=$1} END {print s+0}' > "$out/cost-B-$round.bytes"
done
python3 - "$out" "$n" "$rounds" <<'PY' | tee "$out/cost.txt"
import json, statistics, sys
out, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def inits(side):
    first, rest = [], []
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/cost-{side}-{r}.json"))
        for k in d["ranks"]:
            first.append(k["ms"][0]); rest += k["ms"][1:]
    return d["world"], d["nccl"], first, rest
w, nccl, a1, a = inits("A")
_, _, b1, b = inits("B")
byts = [int(open(f"{out}/cost-B-{r}.bytes").read()) for r in range(1, rounds + 1)]
per_rank = statistics.median(byts) / w
print(f"ranks {w}, NCCL {nccl}, {n} inits per process, {rounds} processes per side, A and B alternating")
print(f"first init (ms, median): A {statistics.median(a1):.1f}  B {statistics.median(b1):.1f}  B/A {statistics.median(b1)/statistics.median(a1):.3f}")
print(f"later inits (ms, median): A {statistics.median(a):.2f}  B {statistics.median(b):.2f}  B/A {statistics.median(b)/statistics.median(a):.3f}")
print(f"log bytes per rank (process of {n} inits): {per_rank:.0f}; per init {per_rank/n:.0f}")
PY
# Everything in one archive (the device tool brings back a few files).
tar -C "$out" -czf /tmp/gdrdoctor-jobs-run.tar.gz . && mv /tmp/gdrdoctor-jobs-run.tar.gz "$out/jobs-run.tar.gz"
echo "RESULT: $failed failed"
exit "$failed"
