#!/usr/bin/env bash
# shellcheck disable=SC2016  # the bash -c snippets expand their own "$1"
# The packages, installed for real: builds the .deb from the binary under test, installs it with
# dpkg -i, and shows that the installed binary, man pages, completions and systemd units work;
# builds the .rpm and installs it into a scratch root with rpm --root. Then removes the .deb.
#   tests/integrations/package.sh        (as root; GDRDOCTOR_BIN: the binary, default release)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}")
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

need=()
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v man >/dev/null || need+=(man-db)
command -v rpmbuild >/dev/null || need+=(rpm)
command -v zsh >/dev/null || need+=(zsh)
command -v fish >/dev/null || need+=(fish)
command -v objdump >/dev/null || need+=(binutils)
command -v bash-completion >/dev/null 2>&1 || [ -f /usr/share/bash-completion/bash_completion ] || need+=(bash-completion)
command -v shellcheck >/dev/null || need+=(shellcheck)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
if grep -rqs 'path-exclude.*/usr/share/man' /etc/dpkg/dpkg.cfg.d/; then
  echo "note: dpkg here excludes /usr/share/man (a container image setting); man pages are checked in the package"
  man_excluded=1
else
  man_excluded=0
fi

check "shellcheck: the shipped scripts (prolog, NHC check, build scripts)" \
  shellcheck packaging/slurm/prolog.sh packaging/slurm/task-prolog.sh packaging/slurm/epilog.sh packaging/stage.sh packaging/deb/build.sh packaging/rpm/build.sh
check "shellcheck: the NHC check function (bash)" shellcheck -s bash packaging/nhc/gdrdoctor.nhc

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# A node that is not ready, as a directory (generated, not committed: fixtures/README.md).
acs=$work/acs-redirect-on-path
fixtures/build.sh acs-redirect-on-path "$acs" >/dev/null
deb=$(packaging/deb/build.sh "$bin" "$work/pkg")
rpm=$(packaging/rpm/build.sh "$bin" "$work/pkg")
echo "built $(basename "$deb") ($(stat -c %s "$deb") bytes), $(basename "$rpm") ($(stat -c %s "$rpm") bytes)"

# --- deb -------------------------------------------------------------------------------------
dpkg -r gdrdoctor >/dev/null 2>&1 || true
check "dpkg -i installs the package" dpkg -i "$deb"
check "dpkg says installed" bash -c "dpkg -s gdrdoctor | grep -q '^Status: install ok installed'"
want=$("$bin" --version)
check "installed /usr/bin/gdrdoctor is the binary under test ($want)" test "$(/usr/bin/gdrdoctor --version)" = "$want"
check "installed binary judges a capture (not ready)" \
  test "$(/usr/bin/gdrdoctor --root "$acs" check --format reason || true)" = "gdrdoctor: fix-in-place(acs-redirect-on-path)"
check "the package depends on nothing beyond libc and libgcc" \
  bash -c "dpkg -s gdrdoctor | grep -qx 'Depends: libc6 (>= [0-9.]*), libgcc-s1'"

# man pages: the main page and one per subcommand, generated from the command line.
if [ "$man_excluded" = 0 ]; then
  check "man -w finds gdrdoctor(1)" test "$(man -w gdrdoctor)" = /usr/share/man/man1/gdrdoctor.1.gz
  page=$(MANPAGER=cat MANWIDTH=100 man gdrdoctor-check 2>/dev/null)
  check "man gdrdoctor-check documents --deadline, --output and the formats" \
    bash -c 'grep -q -- "--deadline" <<<"$1" && grep -q -- "--output" <<<"$1" && grep -q prometheus <<<"$1"' _ "$page"
fi
check "a man page for every subcommand" bash -c \
  'for c in check topo capture fix nccl fleet gdr-test list explain; do dpkg -L gdrdoctor | grep -qx "/usr/share/man/man1/gdrdoctor-$c.1.gz" || { echo "missing $c"; exit 1; }; done'

# bash completion, driven the way bash drives it.
complete_words() {   # complete_words WORD... : what <TAB> offers after them
  bash -c '
    source /usr/share/bash-completion/bash_completion 2>/dev/null || true
    source /usr/share/bash-completion/completions/gdrdoctor
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _gdrdoctor gdrdoctor "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' _ "$@"
}
check "bash completes subcommands (gdrdoctor ch<TAB> -> check)" \
  bash -c '[ "$1" = check ]' _ "$(complete_words gdrdoctor ch)"
check "bash completes formats (check --format <TAB> has junit, prometheus, nfd, reason)" \
  bash -c 'for f in junit prometheus nfd reason; do grep -qx "$f" <<<"$1" || exit 1; done' _ "$(complete_words gdrdoctor check --format '')"
check "bash does not offer the internal subcommands" \
  bash -c '! grep -qx -e probe-gpu -e gdr-pair <<<"$1"' _ "$(complete_words gdrdoctor '')"
check "zsh completion parses" zsh -n /usr/share/zsh/vendor-completions/_gdrdoctor
# fish loads vendor completions by itself: ask it what <TAB> offers.
fish_formats=$(fish -c "complete -C 'gdrdoctor check --format '" | cut -f1)
check "fish completes formats from the installed file (got: ${fish_formats//$'\n'/ })" \
  bash -c 'for f in junit prometheus nfd reason; do grep -qx "$f" <<<"$1" || exit 1; done' _ "$fish_formats"

# systemd units: systemd-analyze verify accepts them (and is shown to refuse a broken one).
units=(/lib/systemd/system/gdrdoctor.service /lib/systemd/system/gdrdoctor-metrics.service /lib/systemd/system/gdrdoctor-metrics.timer)
out=$(systemd-analyze verify "${units[@]}" 2>&1); rc=$?
check "systemd-analyze verify accepts the units (rc=$rc${out:+: $out})" test "$rc" = 0 -a -z "$out"
sed 's|^ExecStart=/usr/bin/gdrdoctor|ExecStart=/usr/bin/gdrdoctor-missing|' /lib/systemd/system/gdrdoctor.service > "$work/gdrdoctor.service"
check "systemd-analyze verify refuses a unit whose binary is missing (the check has teeth)" \
  bash -c '! systemd-analyze verify "$1" >/dev/null 2>&1' _ "$work/gdrdoctor.service"
# The boot unit's own command line, as systemd would expand it (defaults from the unit, a
# capture as the node, /run/gdrdoctor in a scratch directory): it writes the three reports.
execstart=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/gdrdoctor.service)
run=$work/run; mkdir -p "$run"
GDRDOCTOR_BOOT_DEADLINE=$(sed -n 's/^Environment=GDRDOCTOR_BOOT_DEADLINE=//p' /lib/systemd/system/gdrdoctor.service)
cmd=${execstart//\$\{GDRDOCTOR_BOOT_DEADLINE\}/$GDRDOCTOR_BOOT_DEADLINE}
cmd=${cmd//\$GDRDOCTOR_BOOT_ARGS/}
cmd=${cmd//\/run\/gdrdoctor/$run}
cmd=${cmd/\/usr\/bin\/gdrdoctor /\/usr\/bin\/gdrdoctor --root $acs }
echo "boot unit command: $cmd"
set +e; $cmd >/dev/null; rc=$?; set -e
check "the boot unit's command exits 1 on a node that is not ready (the unit fails: loud)" test "$rc" = 1
check "... and leaves report.json, reason and report.xml" test -s "$run/report.json" -a -s "$run/report.xml" -a "$(cat "$run/reason" 2>/dev/null)" = "gdrdoctor: fix-in-place(acs-redirect-on-path)"
check "the metrics unit treats not-ready as success" grep -qx 'SuccessExitStatus=1' /lib/systemd/system/gdrdoctor-metrics.service

# /etc/default/gdrdoctor is a conffile, kept on remove and gone on purge.
check "dpkg -r removes the binary" bash -c 'dpkg -r gdrdoctor >/dev/null && [ ! -e /usr/bin/gdrdoctor ]'
check "... and keeps the edited conffile" test -f /etc/default/gdrdoctor
check "dpkg -P purges it" bash -c 'dpkg -P gdrdoctor >/dev/null && [ ! -e /etc/default/gdrdoctor ]'

# --- rpm -------------------------------------------------------------------------------------
files=$(rpm -qpl "$rpm")
check "the rpm carries the binary, units, man pages, completions, prolog" bash -c '
  for f in /usr/bin/gdrdoctor /usr/lib/systemd/system/gdrdoctor.service /usr/share/man/man1/gdrdoctor.1.gz \
           /usr/share/bash-completion/completions/gdrdoctor /usr/lib/gdrdoctor/slurm-prolog /usr/lib/gdrdoctor/slurm-task-prolog /usr/lib/gdrdoctor/slurm-epilog /usr/lib/tmpfiles.d/gdrdoctor.conf /etc/default/gdrdoctor; do
    grep -qx "$f" <<<"$1" || { echo "missing $f"; exit 1; }; done' _ "$files"
reqs=$(rpm -qp --requires "$rpm")
check "the rpm requires no GPU or RDMA library (found: $(grep -ciE 'ibverbs|cuda|nvidia|amdhip|hsa' <<<"$reqs" || true))" \
  bash -c '! grep -qiE "ibverbs|cuda|nvidia|amdhip|hsa" <<<"$1"' _ "$reqs"
rroot=$work/rpmroot; mkdir -p "$rroot"
check "rpm --root installs it into a scratch root" rpm --root "$rroot" --nodeps --noscripts -i "$rpm"
check "... where its binary runs" test "$("$rroot/usr/bin/gdrdoctor" --version)" = "$want"

echo
if [ "$failed" = 0 ]; then echo "package: all checks passed"; else echo "package: $failed check(s) FAILED"; fi
exit "$failed"
