# shellcheck shell=bash
# Sourced by the integrations that need Python packages from PyPI (ansible.sh, kubernetes.sh).
#
# venv_with VENV PROBE WANT PACKAGE...: a virtual environment at VENV with PACKAGE... (pinned:
# `name==version`) installed; reused when `VENV/bin/python -c PROBE` prints WANT (a version), made
# again otherwise (python3-venv installed first where ensurepip is missing). Calls the caller's
# die() when it cannot.
venv_with() {
  local venv=$1 probe=$2 want=$3 have
  shift 3
  have=$("$venv/bin/python" -c "$probe" 2>/dev/null || true)
  if [ "$have" = "$want" ]; then
    echo "reusing it"
    return
  fi
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  # python3 -m venv needs ensurepip, which Debian ships apart, in python3-venv.
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv >/dev/null; } ||
      die "apt-get install python3-venv"
  fi
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" ||
    die "pip could not install $* from PyPI (no network?)"
}
