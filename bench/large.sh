#!/usr/bin/env bash
# Benchmark (issue 14): wall time and peak RSS of the release binary on a root with thousands
# of GPUs (fixtures/synth/synth.py --large: N GPUs and 8 NICs behind 32-port switches), and of
# `fleet -j 8` over gzip bombs, where the jobs share one memory budget. BENCHMARKS.md, "Large
# roots (issue 14)", has the numbers.
#
#   bench/large.sh [GPUS]                  # default 5000
#   GDRDOCTOR=/path/to/gdrdoctor bench/large.sh   # another build (e.g. an older commit's)
set -euo pipefail
cd "$(dirname "$0")/.."
gpus=${1:-5000}
out=bench/out/large
bin=${GDRDOCTOR:-target/release/gdrdoctor}
[ -n "${GDRDOCTOR:-}" ] || cargo build --release --locked -q
mkdir -p "$out"
root=$out/root-$gpus
if [ ! -f "$root/FIXTURE.md" ]; then
  rm -rf "$root"
  python3 fixtures/synth/synth.py --large "$root" --gpus "$gpus" --nics 8
fi
[ -f "$root.tar.gz" ] || "$bin" --root "$root" capture "$root.tar.gz" 2> /dev/null
# Gzip bombs: 300 members of 1 MiB of zeros (each within the member limit, 300 MiB in all:
# refused at the 256 MiB cap), two honest 200 MiB captures, and a real one.
bombs=$out/bombs
if [ ! -f "$bombs/real.tar.gz" ]; then
  mkdir -p "$bombs"
  python3 - "$bombs" <<'PY'
import io, os, sys, tarfile
d = sys.argv[1]
zeros = b"\0" * (1 << 20)
for name, mib in [("bomb", 300), ("big", 200)]:
    with tarfile.open(f"{d}/{name}.tar.gz", "w:gz", compresslevel=1, format=tarfile.GNU_FORMAT) as t:
        for k in range(mib):
            info = tarfile.TarInfo(f"sys/zeros/{k:04}")
            info.size = len(zeros)
            t.addfile(info, io.BytesIO(zeros))
for k in range(6):
    os.link(f"{d}/bomb.tar.gz", f"{d}/bomb{k}.tar.gz")
for k in range(2):
    os.link(f"{d}/big.tar.gz", f"{d}/big{k}.tar.gz")
PY
  fixtures/build.sh healthy-8gpu-roce "$bombs/healthy-8gpu-roce" > /dev/null
  "$bin" --root "$bombs/healthy-8gpu-roce" capture "$bombs/real.tar.gz" 2> /dev/null
fi

measure() { # LABEL ARGS...: wall time and peak RSS (GNU time), output discarded
  local label=$1
  shift
  /usr/bin/time -f "%e %M" -o "$out/time.txt" "$bin" "$@" > /dev/null 2>&1 || true
  read -r secs kib < <(tail -n 1 "$out/time.txt")
  printf '| %s | %s s | %s MiB |\n' "$label" "$secs" "$((kib / 1024))"
}
echo "binary: $bin; cpus: $(nproc); root: $root ($gpus GPUs, 8 NICs)"
echo "| command | wall | peak RSS |"
echo "|---|---|---|"
measure "topo" --root "$root" topo
measure "topo --format json" --root "$root" topo --format json
measure "check --format json" --root "$root" check --format json
measure "check --format json (the .tar.gz)" --root "$root.tar.gz" check --format json
measure "fleet (the .tar.gz)" fleet "$root.tar.gz"
measure "fleet (the directory)" fleet "$root"
measure "fleet -j 8 (6 bombs, 2 x 200 MiB, 1 real)" fleet -j 8 "$bombs"/bomb?.tar.gz "$bombs"/big?.tar.gz "$bombs/real.tar.gz"
