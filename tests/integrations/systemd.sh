#!/bin/bash
# tests/integrations/systemd.sh: the package's units under a REAL systemd as PID 1. A Debian 12
# root (debootstrap, cached) is booted with systemd-nspawn --boot, each boot from a fresh overlay
# with the .deb (packaging/deb/build.sh, from the binary under test) installed by dpkg -i and the
# units enabled as an operator does. The host watches from outside: systemctl, journalctl and the
# files, through nsenter into the container.
#
# Scenarios, each one boot:
#   ready      gdrdoctor.service reads a ready fixture (GDRDOCTOR_BOOT_ARGS="--root ..." in
#              /etc/default/gdrdoctor): runs once, after the driver units it orders after, before
#              slurmd; writes report.json, reason and report.xml in /run/gdrdoctor; the metrics
#              timer (its times shortened by a drop-in) runs gdrdoctor-metrics.service live in the
#              container twice, and the metrics file is rewritten.
#   not-ready  a not-ready fixture: the unit fails, and `systemctl status`, `journalctl -u` and the
#              reason file say why; boot goes on (slurmd starts); the timer waits its 2 min.
#   hang       /usr/bin/gdrdoctor replaced by a stand-in that never ends and ignores TERM, the
#              unit's TimeoutStartSec shortened to 3 s by a drop-in: the unit fails with
#              'timeout' and slurmd starts within TimeoutStartSec + the unit's TimeoutStopSec.
# STAND-INS: the units gdrdoctor.service orders after (rdma-core's, MLNX_OFED's, NVIDIA's; read
# from its After= lines) are oneshots of the same names that take 1 s, slurmd.service is one that
# takes no time, and systemd-networkd-wait-online takes 1 s (the container has no network but
# lo; the real one would wait 2 min for a link). There are no GPUs, NICs or drivers in the
# container: gdrdoctor.service reads fixtures, the metrics unit reads the container's (host's)
# sysfs and finds no GPU.
#
# Usage (root, from the repository root):
#   tests/integrations/systemd.sh
#   GDRDOCTOR_BIN=/path/to/gdrdoctor tests/integrations/systemd.sh
# Environment:
#   GDRDOCTOR_BIN    the gdrdoctor binary (default ${CARGO_TARGET_DIR:-target}/release/gdrdoctor)
#   GDRDOCTOR_CACHE  where the debootstrapped root is kept (default ~/.cache/gdrdoctor-tests)
#   MIRROR           the Debian mirror for debootstrap (default: the host's apt sources)
#   KEEP_LAB=1       keep the lab directory (console logs) even when everything passed
# Each claim prints one PASS/FAIL line; exit 1 when any failed, 2 when the lab could not be set up.
# Only processes this script started are stopped (systemd-nspawn, by PID).
set -u
cd "$(dirname "$0")/../.." || exit 2
REPO=$(pwd -P)
BIN=${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}
case "$BIN" in /*) ;; *) BIN=$REPO/$BIN ;; esac
CACHE=${GDRDOCTOR_CACHE:-$HOME/.cache/gdrdoctor-tests}
SUITE=bookworm
INCLUDE=systemd,systemd-sysv,dbus
BASE=$CACHE/nspawn-$SUITE
UNIT=packaging/systemd/gdrdoctor.service

die() { echo "SETUP ERROR: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root (systemd-nspawn needs CAP_SYS_ADMIN and mounts)"
[ -x "$BIN" ] || die "no gdrdoctor binary at $BIN (set GDRDOCTOR_BIN)"

. tests/integrations/claims.sh
# has TEXT NEEDLE...: every NEEDLE (a fixed string) is in TEXT.
has() { local t=$1 n; shift; for n in "$@"; do grep -qF -- "$n" <<<"$t" || return 1; done; }
# has_line TEXT PREFIX...: every PREFIX starts a line of TEXT.
has_line() {
  local t=$1 n l ok; shift
  for n in "$@"; do
    ok=
    while IFS= read -r l; do [[ $l == "$n"* ]] && { ok=1; break; }; done <<<"$t"
    [ -n "$ok" ] || return 1
  done
}
indent() { sed 's/^/    /'; }

LAB=$(mktemp -d /tmp/gdrdoctor-systemd.XXXXXX) || die "mktemp"
ROOT=$LAB/root NSPAWN_PID='' LEADER=''
MACHINE=gdrdoctor-$$           # two runs must not share a machine name (nspawn's state directory)
# No machined and no host bus here: the host's PID 1 need not be systemd (../shared/systemd).
NSPAWN=(-q --register=no --keep-unit --private-network -M "$MACHINE" -D "$ROOT")
# cgroup v2 inside, as on a real Debian 12 host, wherever the host has a cgroup2 mount to hand over.
grep -q ' cgroup2 ' /proc/mounts && export SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1
mounted() { awk -v m="$1" '$2 == m {f=1} END {exit !f}' /proc/mounts; }
alive() { [ -n "$NSPAWN_PID" ] && kill -0 "$NSPAWN_PID" 2>/dev/null; }
# in_lab CMD...: run CMD in the booted container, in all its namespaces, with a clean environment.
in_lab() {
  nsenter -t "$LEADER" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 SYSTEMD_COLORS=0 \
    SYSTEMD_PAGER= SYSTEMD_LESS= COLUMNS=200 "$@"
}
show() { in_lab systemctl show -P "$2" "$1"; }   # show UNIT PROPERTY
# stop_lab: orderly poweroff, then TERM (nspawn halts), then KILL; sets NSPAWN_RC.
stop_lab() {
  local sig
  for sig in poweroff TERM KILL; do
    alive || break
    if [ "$sig" = poweroff ]; then in_lab systemctl --no-block poweroff 2>/dev/null
    else kill -"$sig" "$NSPAWN_PID" 2>/dev/null; fi
    for _ in $(seq 1 60); do alive || break; sleep 0.25; done
  done
  NSPAWN_RC=
  if [ -n "$NSPAWN_PID" ]; then wait "$NSPAWN_PID" 2>/dev/null; NSPAWN_RC=$?; NSPAWN_PID=; fi
  LEADER=
}
cleanup() {
  trap - EXIT INT TERM
  stop_lab
  mounted "$ROOT" && umount "$ROOT"
  # nspawn leaves its (empty) propagation directory on a host whose /run is not tmpfs.
  rmdir "/run/systemd/nspawn/propagate/$MACHINE" 2>/dev/null
  if [ "$FAILS" = 0 ] && [ "${KEEP_LAB:-0}" != 1 ]; then rm -rf "$LAB"; else echo "lab kept: $LAB"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
T0=$(now)

# 1. packages, and the base root (debootstrap once, cached) ----------------------------------------
need=()
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v objdump >/dev/null || need+=(binutils)       # packaging/deb/build.sh
if [ ${#need[@]} -gt 0 ]; then
  s=$(now)
  apt-get update -qq >/dev/null || die "apt-get update"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || die "apt-get install ${need[*]}"
  echo "TIME install ${need[*]}: $(ms "$s") ms"
fi
stamp="$SUITE $INCLUDE +networkd"
if [ "$(cat "$BASE/.gdrdoctor-base" 2>/dev/null)" != "$stamp" ]; then
  if [ -z "${MIRROR:-}" ]; then
    MIRROR=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}')
    [ -n "$MIRROR" ] || MIRROR=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) {print $i; exit}}' /etc/apt/sources.list 2>/dev/null)
  fi
  [ -n "${MIRROR:-}" ] || die "no Debian mirror in the apt sources; set MIRROR="
  rm -rf "$BASE" "$BASE.tmp"; mkdir -p "$CACHE"
  s=$(now)
  debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$BASE.tmp" "$MIRROR" > "$LAB/debootstrap.log" 2>&1 \
    || die "debootstrap failed: $(tail -n 3 "$LAB/debootstrap.log" | tr '\n' ' ')"
  echo gdrdoctor-lab > "$BASE.tmp/etc/hostname"
  # Something must pull in the network targets, as ifupdown or NetworkManager do on a real host.
  systemctl --root="$BASE.tmp" enable systemd-networkd.service >/dev/null 2>&1 || die "cannot enable systemd-networkd"
  rm -f "$BASE.tmp"/var/cache/apt/archives/*.deb
  echo "$stamp" > "$BASE.tmp/.gdrdoctor-base"; mv "$BASE.tmp" "$BASE"
  echo "TIME debootstrap $SUITE (cached in $BASE): $(ms "$s") ms"
fi
DEB=$(packaging/deb/build.sh "$BIN" "$LAB/debs") || die "packaging/deb/build.sh"
for f in healthy-8gpu-roce acs-redirect-on-path; do
  fixtures/build.sh "$f" "$LAB/fixtures/$f" >/dev/null || die "fixtures/build.sh $f"
done
echo "systemd: $(systemd-nspawn --version | head -n 1)   gdrdoctor: $("$BIN" --version)   package: $(basename "$DEB")"

# The units gdrdoctor.service orders after, from its own After= lines (the network targets and
# systemd's own units are in the root already).
read -r -a AFTER <<<"$(sed -n 's/^After=//p' "$UNIT" | tr '\n' ' ')"
DRIVERS=()
for u in "${AFTER[@]}"; do
  case "$u" in systemd-*|network*.target) ;; *) DRIVERS+=("$u") ;; esac
done

# 2. one boot -----------------------------------------------------------------------------------
# prepare SCENARIO: a fresh overlay on the base; the .deb installed with dpkg -i and the units
# enabled, offline (no init running: nothing starts before the boot); /etc/default/gdrdoctor;
# the stand-ins; the scenario's changes.
prepare() {
  local u f
  mounted "$ROOT" && umount "$ROOT"
  rm -rf "$LAB/upper" "$LAB/work"; mkdir -p "$LAB/upper" "$LAB/work" "$ROOT"
  mount -t overlay overlay -o "lowerdir=$BASE,upperdir=$LAB/upper,workdir=$LAB/work" "$ROOT" || die "overlay mount"
  systemd-nspawn "${NSPAWN[@]}" --bind-ro="$LAB/debs:/mnt/debs" sh -c \
    'dpkg -i /mnt/debs/*.deb && systemctl enable gdrdoctor.service gdrdoctor-metrics.timer' \
    > "$LAB/install-$1.log" 2>&1 || { cat "$LAB/install-$1.log"; die "dpkg -i / systemctl enable in the root"; }
  f=healthy-8gpu-roce; [ "$1" = not-ready ] && f=acs-redirect-on-path
  mkdir -p "$ROOT/srv"; cp -a "$LAB/fixtures/$f" "$ROOT/srv/node"
  # The boot unit reads the fixture; the metrics unit keeps its defaults and reads the container.
  echo 'GDRDOCTOR_BOOT_ARGS=--root /srv/node' >> "$ROOT/etc/default/gdrdoctor"
  for u in "${DRIVERS[@]}"; do standin "$u" 1; done
  standin slurmd.service 0
  dropin systemd-networkd-wait-online.service stand-in '[Service]' 'ExecStart=' 'ExecStart=/bin/sleep 1'
  case "$1" in
    ready)
      # The timer's own OnBootSec=2min/OnUnitActiveSec=10min (checked in not-ready), shortened.
      dropin gdrdoctor-metrics.timer test '[Timer]' 'OnBootSec=' 'OnBootSec=3s' 'OnUnitActiveSec=4s' \
        'RandomizedDelaySec=0' 'AccuracySec=1s' ;;
    hang)
      printf '#!/bin/sh\n# stand-in: a gdrdoctor stuck in a driver call\ntrap "" TERM\nwhile :; do sleep 1; done\n' \
        > "$ROOT/usr/bin/gdrdoctor"
      dropin gdrdoctor.service test '[Service]' 'TimeoutStartSec=3s' ;;
  esac
}
# standin UNIT SECONDS: a oneshot (or a target) of that name that takes SECONDS, enabled.
standin() {
  local name=$1 file=$1
  case "$name" in *@*.service) file=${name%%@*}@.service ;; esac   # an instance of a template
  if [ "${name##*.}" = target ]; then
    printf '[Unit]\nDescription=stand-in %s\n[Install]\nWantedBy=multi-user.target\n' "$name"
  else
    printf '[Unit]\nDescription=stand-in %s\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sleep %s\n[Install]\nWantedBy=multi-user.target\n' "$name" "$2"
  fi > "$ROOT/etc/systemd/system/$file"
  systemctl --root="$ROOT" enable "$name" >/dev/null 2>&1 || die "cannot enable the stand-in $name"
}
dropin() {   # dropin UNIT NAME LINE...
  mkdir -p "$ROOT/etc/systemd/system/$1.d"
  printf '%s\n' "${@:3}" > "$ROOT/etc/systemd/system/$1.d/$2.conf"
}
# boot: systemd as the container's PID 1, console to a file; waits until the boot is over.
boot() {
  local s; s=$(now)
  systemd-nspawn "${NSPAWN[@]}" --boot --console=read-only --setenv=SYSTEMD_COLORS=0 \
    > "$LAB/console-$1.log" 2>&1 < /dev/null &
  NSPAWN_PID=$!
  for _ in $(seq 1 200); do LEADER=$(pgrep -P "$NSPAWN_PID" -x systemd) && break; alive || break; sleep 0.05; done
  [ -n "$LEADER" ] || { cat "$LAB/console-$1.log"; die "the container did not start"; }
  STATE=
  for _ in $(seq 1 240); do   # "offline" until PID 1 listens; --wait returns once the boot is over
    STATE=$(in_lab timeout 60 systemctl is-system-running --wait 2>/dev/null)
    case $STATE in running|degraded|maintenance|stopping) break ;; esac; sleep 0.25
  done
  echo "TIME boot to is-system-running=$STATE: $(ms "$s") ms (host clock, from systemd-nspawn's start)"
  USERSPACE=$(in_lab systemctl show -P UserspaceTimestampMonotonic)
}
since_boot() { echo $(( ($1 - USERSPACE) / 1000 )); }   # a monotonic timestamp (us) -> ms after systemd started
run_show() { echo "---- \$ $*"; in_lab "$@" | indent; }
G=gdrdoctor.service M=gdrdoctor-metrics.service

# 3. ready --------------------------------------------------------------------------------------
echo "== ready (fixture healthy-8gpu-roce)"
prepare ready
check "systemctl enable linked the boot unit and the timer (multi-user.target, timers.target)" \
  test -L "$ROOT/etc/systemd/system/multi-user.target.wants/$G" -a -L "$ROOT/etc/systemd/system/timers.target.wants/gdrdoctor-metrics.timer"
boot ready
check "systemd is PID 1 in the container" test "$(in_lab readlink /proc/1/exe)" = /usr/lib/systemd/systemd
expect_eq "ready: the boot finished: is-system-running" "$STATE" running
run_show systemctl status --no-pager --lines=4 "$G"
expect_eq "ready: $G active (exited), Result=success, exit 0" \
  "$(show $G ActiveState)/$(show $G SubState)/$(show $G Result)/$(show $G ExecMainStatus)" active/exited/success/0
expect_eq "ready: $G ran once at boot (journal: one start)" \
  "$(in_lab journalctl -b --no-pager -o cat -u $G | grep -c '^Starting gdrdoctor.service')" 1
START=$(show $G ExecMainStartTimestampMonotonic) EXIT=$(show $G ExecMainExitTimestampMonotonic)
BOOT_UNIT_MS=$(( (EXIT - START) / 1000 ))
echo "TIME boot unit (ready): gdrdoctor ran $BOOT_UNIT_MS ms (ExecStart to exit), started $(since_boot "$START") ms after systemd started"
for u in "${DRIVERS[@]}" network-online.target; do
  at=$(show "$u" ActiveEnterTimestampMonotonic)
  check "ready: $G started after $u was up ($(since_boot "${at:-0}") ms <= $(since_boot "$START") ms)" \
    test "${at:-0}" -gt 0 -a "${at:-0}" -le "$START"
done
echo "  systemd-modules-load.service in the container: condition $(show systemd-modules-load.service ConditionResult) (ConditionCapability=CAP_SYS_MODULE)"
SLURMD=$(show slurmd.service ExecMainStartTimestampMonotonic)
check "ready: slurmd (Before=) started after $G ended ($(since_boot "$SLURMD") ms >= $(since_boot "$EXIT") ms)" \
  test "${SLURMD:-0}" -ge "$EXIT"
expect_eq "ready: /run/gdrdoctor/reason" "$(in_lab cat /run/gdrdoctor/reason)" "gdrdoctor: ready"
in_lab cat /run/gdrdoctor/report.json > "$LAB/report.json"
in_lab cat /run/gdrdoctor/report.xml > "$LAB/report.xml"
check "ready: /run/gdrdoctor/report.json says ready" \
  python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["verdict"]["ready"] else 1)' "$LAB/report.json"
check "ready: /run/gdrdoctor/report.xml is JUnit XML with no failure" python3 -c '
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
sys.exit(0 if r.tag == "testsuites" and r.get("failures") == "0" and r.iter("testcase") else 1)' "$LAB/report.xml"
J=$(in_lab journalctl -b --no-pager -o cat -u $G)
check "ready: journalctl -u $G shows the report's verdict and the unit finishing" \
  has_line "$J" 'READY ' 'Finished gdrdoctor.service' 

# The metrics timer: first run at 3 s, the next 4 s after it (the drop-in). Wait for two ends.
for _ in $(seq 1 80); do
  [ "$(in_lab journalctl -b --no-pager -o cat -u $M | grep -c '^Finished gdrdoctor-metrics.service')" -ge 1 ] && break
  sleep 0.25
done
PROM=/var/lib/prometheus/node-exporter/gdrdoctor.prom
first=$(in_lab stat -c '%i %Y.%y' "$PROM" 2>/dev/null) first_inv=$(show $M InvocationID)
for _ in $(seq 1 80); do
  [ "$(in_lab journalctl -b --no-pager -o cat -u $M | grep -c '^Finished gdrdoctor-metrics.service')" -ge 2 ] && break
  sleep 0.25
done
run_show systemctl list-timers --all --no-pager gdrdoctor-metrics.timer
run_show journalctl -b --no-pager -o short-monotonic -u $M
MJ=$(in_lab journalctl -b --no-pager -o cat -u $M)
expect_eq "metrics: the timer ran $M twice (journal)" "$(grep -c '^Finished gdrdoctor-metrics.service' <<<"$MJ")" 2
expect_eq "metrics: $M Result=success (not ready is a metric, not a unit failure)" "$(show $M Result)" success
second=$(in_lab stat -c '%i %Y.%y' "$PROM" 2>/dev/null)
check "metrics: the first run wrote $PROM into a directory that did not exist (ExecStartPre)" test -n "$first"
check "metrics: the second run rewrote it (a new file: '$first' -> '$second')" \
  test -n "$second" -a "$second" != "$first" -a "$(show $M InvocationID)" != "$first_inv"
check "metrics: the file holds gdrdoctor_ready" grep -q '^gdrdoctor_ready ' <<<"$(in_lab cat "$PROM")"
check "metrics: the baseline for the next run is kept (StateDirectory)" in_lab test -s /var/lib/gdrdoctor/baseline.tar.gz
stop_lab
expect_eq "ready: orderly poweroff (systemd-nspawn exit)" "$NSPAWN_RC" 0
check "ready: after the poweroff the host reads the container's journal of $G" \
  grep -q '^READY ' <<<"$(journalctl --no-pager --root="$ROOT" -o cat -u $G 2>/dev/null)"

# 4. not ready ----------------------------------------------------------------------------------
echo "== not ready (fixture acs-redirect-on-path)"
prepare not-ready
boot not-ready
expect_eq "not-ready: the boot finished, degraded by the failed unit" "$STATE" degraded
ST=$(in_lab systemctl status --no-pager "$G"); echo "---- \$ systemctl status $G"; indent <<<"$ST"
expect_eq "not-ready: $G failed, Result=exit-code, exit 1" \
  "$(show $G ActiveState)/$(show $G Result)/$(show $G ExecMainStatus)" failed/exit-code/1
check "not-ready: systemctl status shows 'failed (Result: exit-code)' and status=1/FAILURE" \
  has "$ST" "Active: failed (Result: exit-code)" "status=1/FAILURE"
check "not-ready: systemctl status shows gdrdoctor's verdict with the code" has "$ST" "NOT READY acs (acs-redirect-on-path)"
check "not-ready: systemctl --failed lists it" has "$(in_lab systemctl --failed --no-legend --plain)" "$G"
J=$(in_lab journalctl -b --no-pager -o cat -u $G)
echo "---- \$ journalctl -u $G (the failing check, its fix)"; grep -A3 '^FAIL' <<<"$J" | indent
check "not-ready: journalctl -u shows the failing check, its fix and the unit's failure" \
  has_line "$J" 'FAIL    acs' '          fix:' "gdrdoctor.service: Failed with result 'exit-code'"
expect_eq "not-ready: /run/gdrdoctor/reason" "$(in_lab cat /run/gdrdoctor/reason)" "gdrdoctor: fix-in-place(acs-redirect-on-path)"
START=$(show $G ExecMainStartTimestampMonotonic) EXIT=$(show $G ExecMainExitTimestampMonotonic)
echo "TIME boot unit (not ready): gdrdoctor ran $(( (EXIT - START) / 1000 )) ms, started $(since_boot "$START") ms after systemd started"
SLURMD=$(show slurmd.service ExecMainStartTimestampMonotonic)
check "not-ready: boot went on: slurmd started after $G failed ($(since_boot "${SLURMD:-0}") ms)" \
  test "${SLURMD:-0}" -ge "$EXIT" -a "$(show slurmd.service ActiveState)" = active
NEXT=$(show gdrdoctor-metrics.timer NextElapseUSecMonotonic)
next_us=$(in_lab systemd-analyze timespan "$NEXT" | sed -n 's/^ *μs: *//p')
echo "  gdrdoctor-metrics.timer as shipped: next run at monotonic $NEXT, $(since_boot "${next_us:-0}") ms after systemd started"
check "not-ready: the shipped timer waits OnBootSec=2min (+ up to RandomizedDelaySec=30s) after boot" \
  test "$(since_boot "${next_us:-0}")" -ge 120000 -a "$(since_boot "${next_us:-0}")" -le 151000
stop_lab

# 5. hang ---------------------------------------------------------------------------------------
echo "== a gdrdoctor that hangs and ignores TERM (stand-in binary; TimeoutStartSec=3s by a drop-in)"
prepare hang
boot hang
START=$(show $G ExecMainStartTimestampMonotonic)
SLURMD=$(show slurmd.service ExecMainStartTimestampMonotonic)
STOP=$(sed -n 's/^TimeoutStopSec=//p' "$UNIT")
waited=$(( (SLURMD - START) / 1000 ))
echo "TIME slurmd started $waited ms after $G (TimeoutStartSec=3s + the unit's TimeoutStopSec=${STOP}s)"
expect_eq "hang: $G failed with Result=timeout" "$(show $G ActiveState)/$(show $G Result)" failed/timeout
check "hang: slurmd started within TimeoutStartSec + TimeoutStopSec + 2 s ($waited ms)" \
  test "${SLURMD:-0}" -gt 0 -a "$waited" -le $(( (3 + STOP + 2) * 1000 ))
J=$(in_lab journalctl -b --no-pager -o cat -u $G)
echo "---- \$ journalctl -u $G"; indent <<<"$J"
check "hang: the journal says it timed out, was killed, and failed" \
  has "$J" "start operation timed out. Terminating." "timed out. Killing." "Failed with result 'timeout'"
s=$(now); stop_lab
expect_eq "hang: orderly poweroff (systemd-nspawn exit)" "$NSPAWN_RC" 0
echo "TIME poweroff: $(ms "$s") ms"

echo "TIME total: $(ms "$T0") ms   boot unit (ready): $BOOT_UNIT_MS ms"
echo "RESULT: $PASS passed, $FAILS failed"
[ "$FAILS" = 0 ]
