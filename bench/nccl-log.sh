#!/usr/bin/env bash
# Benchmark (issue 17): `gdrdoctor nccl explain` on a generated 1 GiB NCCL_DEBUG=INFO log of 16
# nodes x 8 GPUs, interleaved (bench/nccl-log.py), on one core (taskset -c 0): wall time, MB/s,
# peak RSS; then a 2 GiB log, read from a file, from a pipe (standard input) and gzip-compressed,
# to show that memory does not grow with the log. BENCHMARKS.md, "nccl explain (issue 17)", has
# the numbers.
#
#   bench/nccl-log.sh [RUNS]                        # default 3 runs of the 1 GiB log
#   GDRDOCTOR=/path/to/gdrdoctor bench/nccl-log.sh  # another build
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
out=bench/out/nccl-log
bin=${GDRDOCTOR:-target/release/gdrdoctor}
[ -n "${GDRDOCTOR:-}" ] || cargo build --release --locked -q
mkdir -p "$out"
[ -f "$out/1g.log" ] || python3 bench/nccl-log.py "$out/1g.log" 1024 16
[ -f "$out/2g.log" ] || python3 bench/nccl-log.py "$out/2g.log" 2048 16
[ -f "$out/2g.log.gz" ] || gzip -1 -c "$out/2g.log" > "$out/2g.log.gz"

measure() { # LABEL BYTES ARGS...: one run on CPU 0, output discarded; prints a table row
  local label=$1 bytes=$2
  shift 2
  /usr/bin/time -f "%e %M" -o "$out/time.txt" taskset -c 0 "$@" > /dev/null 2>&1 || true
  read -r secs kib < <(tail -n 1 "$out/time.txt")
  printf '| %s | %s s | %s MB/s | %s MiB |\n' "$label" "$secs" \
    "$(python3 -c "print(round($bytes / 1e6 / max($secs, 0.001)))")" \
    "$(python3 -c "print(round($kib / 1024, 1))")"
}
size1=$(stat -c %s "$out/1g.log")
size2=$(stat -c %s "$out/2g.log")
echo "binary: $bin; cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "| input | wall | speed | peak RSS |"
echo "|---|---|---|---|"
# The page cache holds the file after the generator (and after the first run); the runs
# measure parsing, not the disk.
cat "$out/1g.log" > /dev/null
for _ in $(seq "$runs"); do
  measure "1 GiB log ($size1 bytes)" "$size1" "$bin" nccl explain "$out/1g.log"
done
measure "1 GiB log, --format json" "$size1" "$bin" nccl explain --format json "$out/1g.log"
cat "$out/2g.log" > /dev/null
measure "2 GiB log ($size2 bytes)" "$size2" "$bin" nccl explain "$out/2g.log"
measure "2 GiB log on standard input (cat \| gdrdoctor ... -)" "$size2" \
  sh -c "cat '$out/2g.log' | '$bin' nccl explain -"
measure "2 GiB log gzip-compressed ($(stat -c %s "$out/2g.log.gz") bytes)" "$size2" \
  "$bin" nccl explain "$out/2g.log.gz"
# The explanation itself, for the record.
"$bin" nccl explain "$out/1g.log" | tail -n 8 || true
