#!/usr/bin/env bash
# The release binary must start on a fresh node: no libibverbs, CUDA, NVML or ROCm installed, and
# nothing of theirs linked. Checks its NEEDED entries, then runs it live and on a capture.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/gdrdoctor}
[ -x "$bin" ] || { echo "release-binary: $bin missing; run cargo build --release" >&2; exit 1; }

allowed='^(libc\.so\.6|libm\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$'
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "NEEDED: $(echo $needed)"
bad=$(printf '%s\n' $needed | grep -Ev "$allowed" || true)
if [ -n "$bad" ]; then
  echo "release-binary: FAIL: links libraries a fresh node lacks: $bad" >&2
  exit 1
fi

# A live run on this machine (CI has no libibverbs, CUDA, NVML or ROCm): it must report, with
# exit 0 or 1, never crash.
set +e
"$bin" check --color never > /tmp/gdrdoctor-live.txt 2>&1
rc=$?
set -e
tail -n 1 /tmp/gdrdoctor-live.txt
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
  echo "release-binary: FAIL: live check exited $rc" >&2
  cat /tmp/gdrdoctor-live.txt >&2
  exit 1
fi
"$bin" --root fixtures/h200x2-vm/capture.tar.gz check --format json > /dev/null || [ $? -eq 1 ]

# The GPU probe on this machine, asked about the captured H200s (--gpu-probe): where the NVIDIA
# libraries are absent (CI), the same binary must say so as findings with fixes, not crash.
# grep without -q reads to the end: with -q it can exit at the first match while ldconfig still
# writes, and pipefail would then read ldconfig's SIGPIPE as "not installed".
if ldconfig -p 2>/dev/null | grep -E 'libnvidia-ml\.so\.1|libcuda\.so\.1' >/dev/null; then
  echo "release-binary: NVIDIA libraries installed here; the absent-library run is left to tests/gpu_runtime.rs"
else
  set +e
  "$bin" --root fixtures/h200x2-vm/capture.tar.gz check --gpu-probe --select gpu --color never > /tmp/gdrdoctor-probe.txt 2>&1
  rc=$?
  set -e
  grep -E '^ +FAIL (libnvidia-ml|libcuda)' /tmp/gdrdoctor-probe.txt || true
  if [ "$rc" -ne 1 ] || [ "$(grep -c -E '^ +FAIL (libnvidia-ml\.so\.1|libcuda\.so\.1): ' /tmp/gdrdoctor-probe.txt)" -ne 2 ]; then
    echo "release-binary: FAIL: missing NVIDIA libraries not reported (exit $rc)" >&2
    cat /tmp/gdrdoctor-probe.txt >&2
    exit 1
  fi
fi
echo "release-binary: ok"
