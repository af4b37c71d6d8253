#!/usr/bin/env bash
# Issue 40 on a GPU machine (the device tool's): what a run judged is said in the human report.
# `check --sample 3` states its window, `check --baseline FILE` run twice states the time since
# the last run (the first run says it judged one reading), kernel-log says the span it judged,
# the GPU evidence names each GPU by its bus id, and `--deadline 0.6` leaves the GPU probe the
# deadline less a tenth of it. Prints PASS/FAIL per claim and exits non-zero if any fails.
# Output under $OUT (or /tmp/gdrdoctor-span). Usage: span.sh [BINARY]
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/gdrdoctor}
out=${OUT:-/tmp/gdrdoctor-span}
mkdir -p "$out"
echo "== machine"
uname -r; nvidia-smi -L
echo "== check (plain)"
"$bin" check --color never > "$out/plain.txt"; echo "exit $?"
cat "$out/plain.txt"
echo "== check --sample 3"
"$bin" check --color never --sample 3 > "$out/sample.txt"; echo "exit $?"
cat "$out/sample.txt"
base="$out/baseline.tar.gz"
rm -f "$base"
echo "== check --baseline (first run)"
"$bin" check --color never --baseline "$base" > "$out/baseline-1.txt" 2> "$out/baseline-1.err"; echo "exit $?"
cat "$out/baseline-1.txt"
sleep 2
echo "== check --baseline (second run)"
"$bin" check --color never --baseline "$base" > "$out/baseline-2.txt" 2> "$out/baseline-2.err"; echo "exit $?"
cat "$out/baseline-2.txt"
echo "== check -v --gpu-probe (evidence)"
"$bin" check --color never -v --select gpu,peer-memory > "$out/evidence.txt"; echo "exit $?"
echo "== check --deadline 0.6"
"$bin" check --color never -v --deadline 0.6 --select gpu > "$out/deadline.txt"; echo "exit $?"
cat "$out/deadline.txt"
echo "== claims"
failed=0
claim() { if eval "$2"; then echo "PASS $1"; else echo "FAIL $1"; failed=1; fi; }
claim "a plain check states no window" "! grep -q 'judged over\|judged since' '$out/plain.txt'"
claim "--sample 3 states a 3.0 s window" "sed -n 3p '$out/sample.txt' | grep -q '^counters judged over a 3.0 s window (--sample: read twice)'"
claim "--sample changes the human report" "! cmp -s '$out/plain.txt' '$out/sample.txt'"
claim "kernel-log names the window under --sample" "grep 'kernel-log' '$out/sample.txt' | grep -q 'window'"
claim "the first --baseline run says it judged one reading" "grep -q 'no baseline yet (the first run writes it): one reading judged' '$out/baseline-1.txt'"
claim "the second --baseline run states the time since the last run" "grep -Eq '^counters and the kernel log judged since the last run, [0-9.]+ s ago \(--baseline ' '$out/baseline-2.txt'"
claim "kernel-log names the span since the last run" "grep 'kernel-log' '$out/baseline-2.txt' | grep -q 'since the last run'"
n=$(nvidia-smi -L | wc -l)
claim "each GPU's CUDA evidence names its own bus id ($n GPUs)" "[ \$(grep -c 'CUDA on ' '$out/evidence.txt') -ge $n ] && ! grep -q 'CUDA device 0:' '$out/evidence.txt'"
claim "no evidence reads 'as /dmabuf:'" "! grep -q 'as /dmabuf:' '$out/evidence.txt'"
claim "no 'the GPU probe failed: the GPU probe'" "! grep -rq 'the GPU probe failed: the GPU probe' '$out'"
claim "no skip says passed" "! grep -E '^SKIP' '$out'/*.txt | grep -q 'passed'"
claim "--deadline 0.6: the GPUs answer, or the cut names the reserve" "grep -q 'PASS    gpu' '$out/deadline.txt' || grep -q 'less 100 ms kept for judging' '$out/deadline.txt'"
exit $failed
