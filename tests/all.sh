#!/usr/bin/env bash
# The whole test suite, as the README and CI run it, from a fresh clone.
#
# Beyond the Rust toolchain, the tests need the Debian packages below. As root, the missing ones
# are installed first (apt-get, noninteractive); otherwise one message lists them all, with the
# apt-get command, before any test runs. The integrations (tests/integrations/) and the lab
# (tests/lab/) install their own components as root, when they run.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'tests/all.sh: %s\n' "$*" >&2; }
start=$SECONDS

# ----------------------------------------------------------------------- prerequisites --
# One line per package: its Debian name, then what shows it is installed (a command on PATH, or
# a file), then why the tests need it.
requirements='
gcc             cmd:cc                                the stand-in GPU and verbs libraries (tests/stubs), the verbs layout test
libc6-dev       file:/usr/include/stdio.h             their C headers (gcc installed without its recommends lacks them)
libibverbs-dev  file:/usr/include/infiniband/verbs.h  rdma-core header: the verbs layout test and the stand-in libibverbs
shellcheck      cmd:shellcheck                        every rendered fix script must pass it (tests/fixscript.rs)
pciutils        cmd:lspci                             the differential test decodes config space with lspci -F (tests/pciutils.rs)
python3         cmd:python3                           the fixture generator check (fixtures/synth), the lab judge, the fix harness stand-ins (tests/fixes)
binutils        cmd:readelf                           the release binary links nothing a fresh node lacks (tests/release-binary.sh)
coreutils       cmd:mkfifo                            the FIFO and device-node cases of tests/broken.rs and src/root/
util-linux      cmd:setpriv                           the unreadable-file case as root runs gdrdoctor as nobody (tests/broken.rs)
tar             cmd:tar                               capture archives (tests/capture.rs)
gzip            cmd:gzip                              the gzip bomb in tests/fleet.rs
findutils       cmd:find                              tests/pciutils.rs
libc-bin        cmd:ldconfig                          tests/release-binary.sh asks whether NVIDIA libraries are installed
librsvg2-bin    cmd:rsvg-convert                      the topo picture (SVG) is rendered to PNG (tests/topo_picture.rs)
graphviz        cmd:dot                               topo --format dot of every fixture is laid out with dot -Tsvg (tests/topo_picture.rs)
'
missing() { # the packages whose marker is absent, one per line
    local pkg marker _
    while read -r pkg marker _; do
        [ -n "$pkg" ] || continue
        case "$marker" in
            cmd:*) command -v "${marker#cmd:}" >/dev/null 2>&1 || echo "$pkg" ;;
            file:*) [ -e "${marker#file:}" ] || echo "$pkg" ;;
        esac
    done <<<"$requirements"
}
mapfile -t need < <(missing)
root=0
[ "$(id -u)" = 0 ] && root=1
problems=()
if [ ${#need[@]} -gt 0 ] && { [ $root = 0 ] || ! command -v apt-get >/dev/null; }; then
    while read -r pkg marker why; do
        if [ -n "$pkg" ] && [[ " ${need[*]} " == *" $pkg "* ]]; then
            problems+=("  $pkg (${marker#*:}): $why")
        fi
    done <<<"$requirements"
    if command -v apt-get >/dev/null; then
        problems+=("  as root: apt-get install -y --no-install-recommends ${need[*]}")
    else
        problems+=("  (Debian package names; no apt-get here: install their equivalents)")
    fi
fi
if [ $root = 0 ]; then
    [ "${GDRDOCTOR_SKIP_INTEGRATIONS:-0}" = 1 ] ||
        problems+=("  the integrations install packages and run as root (GDRDOCTOR_SKIP_INTEGRATIONS=1 leaves them out)")
    [ "${GDRDOCTOR_SKIP_LAB:-0}" = 1 ] ||
        problems+=("  the lab installs QEMU and a kernel and runs as root (GDRDOCTOR_SKIP_LAB=1 leaves it out)")
fi
if [ ${#problems[@]} -gt 0 ]; then
    say "cannot run the tests here; nothing was run:"
    printf '%s\n' "${problems[@]}" >&2
    exit 2
fi
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need[@]}"
    mapfile -t need < <(missing)
    if [ ${#need[@]} -gt 0 ]; then
        say "still missing after apt-get install: ${need[*]}"
        exit 2
    fi
fi

# --------------------------------------------------------------------------------- steps --
# Each step's wall time, for the summary at the end (the README quotes them).
times=("prerequisites $((SECONDS - start)) s") current='' since=$SECONDS
step() { # step NAME TITLE
    [ -z "$current" ] || times+=("$current $((SECONDS - since)) s")
    current=$1 since=$SECONDS
    [ $# -lt 2 ] || printf '\n== %s\n' "$2"
}

step tests "unit and integration tests"
cargo test --locked

step clippy "lints (clippy.toml keeps file access inside src/root/)"
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --locked --all-targets -- -D warnings
else
  echo "clippy is not installed here: lint step NOT run"
fi

step release-binary "release binary: no GPU or RDMA library linked, starts on a fresh node"
cargo build --locked --release
tests/release-binary.sh "${CARGO_TARGET_DIR:-target}/release/gdrdoctor"

step integrations "integrations: packages, systemd, Prometheus, JUnit, Slurm, NHC, Ansible, Kubernetes (tests/integrations/)"
if [ "${GDRDOCTOR_SKIP_INTEGRATIONS:-0}" = 1 ]; then
  echo "GDRDOCTOR_SKIP_INTEGRATIONS=1: the integrations were NOT run"
else
  tests/integrations/run.sh
fi

step lab "lab: gdrdoctor in a real kernel under QEMU (tests/lab/README.md)"
if [ "${GDRDOCTOR_SKIP_LAB:-0}" = 1 ]; then
  echo "GDRDOCTOR_SKIP_LAB=1: the lab was NOT run"
else
  tests/lab/lab.sh
fi

step end
echo
printf 'time:'; printf ' %s,' "${times[@]}"; printf ' total %s s\n' "$((SECONDS - start))"
echo "all tests passed"
