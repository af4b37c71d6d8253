#!/usr/bin/env bash
# Where operators run gdrdoctor, with the real components (tests/integrations/README.md):
# the packages (dpkg -i, rpm, systemd-analyze), the machine formats (promtool, node_exporter,
# junitparser), a real single-node Slurm running the prolog, the real NHC (also as Slurm's
# HealthCheckProgram), the units under a booted systemd (systemd-nspawn), ansible-core, and the
# Kubernetes DaemonSet's command. Each script installs what it needs (apt as root, PyPI into a
# cached venv; debootstrap's root in the same cache). Runs them all, then fails if any failed.
#   tests/integrations/run.sh [NAME...]     (GDRDOCTOR_BIN: the binary, default release)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
names=("$@")
# A root directory that other users cannot enter (mode 0700: a chroot made with mktemp, as
# ../shared/fresh/fresh-debian.sh makes one) stops every daemon and package script that drops to
# a user of its own: munge's postinst fails with "su: failed to execute /bin/sh: Permission
# denied" and Slurm never installs. A real / is 0755; make it so (a no-op on any real machine).
if [ "$(id -u)" = 0 ] && [ "$(stat -c %a /)" != 755 ] && [ "$(stat -c %u /)" = 0 ]; then
  echo "integrations: / is mode $(stat -c %a /), which no other user can enter: setting 755, as a real root directory is"
  chmod 755 /
fi
[ ${#names[@]} -gt 0 ] || names=(package formats slurm slurm-jobs nhc systemd ansible kubernetes)
failed=()
for n in "${names[@]}"; do
  printf '\n-- integrations: %s\n' "$n"
  start=$SECONDS
  if "tests/integrations/$n.sh"; then
    echo "-- integrations: $n passed ($((SECONDS - start)) s)"
  else
    echo "-- integrations: $n FAILED ($((SECONDS - start)) s)"
    failed+=("$n")
  fi
done
echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "integrations FAILED: ${failed[*]}"
  exit 1
fi
echo "integrations: all ${#names[@]} passed"
