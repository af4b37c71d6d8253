#!/usr/bin/env bash
# The whole test suite, as the README and CI run it, from a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "unit and integration tests"
cargo test --locked

step "lints (clippy.toml keeps file access inside src/root.rs)"
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --locked --all-targets -- -D warnings
else
  echo "clippy is not installed here: lint step NOT run"
fi

step "release binary: no GPU or RDMA library linked, starts on a fresh node"
cargo build --locked --release
tests/release-binary.sh "${CARGO_TARGET_DIR:-target}/release/gdrdoctor"

step "integrations: packages, systemd, Prometheus, JUnit, Slurm, NHC, Ansible, Kubernetes (tests/integrations/)"
if [ "${GDRDOCTOR_SKIP_INTEGRATIONS:-0}" = 1 ]; then
  echo "GDRDOCTOR_SKIP_INTEGRATIONS=1: the integrations were NOT run"
else
  tests/integrations/run.sh
fi

step "lab: gdrdoctor in a real kernel under QEMU (tests/lab/README.md)"
if [ "${GDRDOCTOR_SKIP_LAB:-0}" = 1 ]; then
  echo "GDRDOCTOR_SKIP_LAB=1: the lab was NOT run"
else
  tests/lab/lab.sh
fi

echo
echo "all tests passed"
