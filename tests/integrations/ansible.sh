#!/usr/bin/env bash
# The Ansible module (packaging/ansible/library/gdrdoctor_check.py) and the example playbook, run by a
# real ansible-core against localhost (-c local) on the fixtures.
#
#   tests/integrations/ansible.sh
#
# ansible-core comes from PyPI into a virtual environment under the cache directory
# (${GDRDOCTOR_CACHE:-$HOME/.cache/gdrdoctor-tests}/ansible-venv), made once and reused. The binary
# under test is $GDRDOCTOR_BIN (default: ${CARGO_TARGET_DIR:-target}/release/gdrdoctor).
# Exits non-zero when anything fails; tests/integrations/ansible/test.yml states every expectation
# as an assert.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD

ansible_core_version=2.17.14   # controller Python 3.10-3.12
cache=${GDRDOCTOR_CACHE:-$HOME/.cache/gdrdoctor-tests}
venv=$cache/ansible-venv
bin=${GDRDOCTOR_BIN:-${CARGO_TARGET_DIR:-target}/release/gdrdoctor}
case $bin in /*) ;; *) bin=$repo/$bin ;; esac

step() { printf '\n== ansible: %s\n' "$*"; }
die() { echo "ansible: FAIL: $*" >&2; exit 1; }
. tests/integrations/venv.sh

[ -x "$bin" ] || die "$bin missing: cargo build --release, or set GDRDOCTOR_BIN"

step "ansible-core $ansible_core_version in $venv"
venv_with "$venv" 'import ansible.release as r; print(r.__version__)' "$ansible_core_version" \
  "ansible-core==$ansible_core_version"
# Its first line only, taken after it has finished: through a pipe to head, ansible can still be
# writing when head exits, and then fails with EPIPE (seen once, on a fresh Debian 12).
version=$("$venv/bin/ansible" --version)
echo "${version%%$'\n'*}"

work=$(mktemp -d "${TMPDIR:-/tmp}/gdrdoctor-ansible.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin" "$work/reports"
ln -s "$bin" "$work/bin/gdrdoctor"
# The fixtures it runs on, as directories (generated, not committed: fixtures/README.md).
for f in healthy-8gpu-roce acs-redirect-on-path config-unprivileged; do
  fixtures/build.sh "$f" "$work/fixtures/$f" >/dev/null || die "fixtures/build.sh $f"
done
: > "$work/ansible.cfg"

# Nothing from the user's or the repository's Ansible configuration.
export ANSIBLE_CONFIG=$work/ansible.cfg
export ANSIBLE_HOME=$work/ansible-home
export ANSIBLE_LOCAL_TEMP=$work/ansible-tmp
export ANSIBLE_LIBRARY=$repo/packaging/ansible/library
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_RETRY_FILES_ENABLED=0
export ANSIBLE_LOCALHOST_WARNING=0 ANSIBLE_INVENTORY_UNPARSED_WARNING=0

step "the module: only the standard library and ansible.module_utils; documentation parses"
"$venv/bin/python" - "$ANSIBLE_LIBRARY/gdrdoctor_check.py" <<'EOF'
import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
bad = []
for node in ast.walk(tree):
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        names = [node.module or ""]
    else:
        continue
    for name in names:
        if not (name in ("json", "os", "__future__") or name.startswith("ansible.module_utils.")):
            bad.append(name)
if bad:
    sys.exit("imports beyond the standard library's json/os and ansible.module_utils: %s" % bad)
print("imports ok")
EOF
"$venv/bin/ansible-doc" -M "$ANSIBLE_LIBRARY" gdrdoctor_check > "$work/doc.txt" 2>&1 ||
  { cat "$work/doc.txt" >&2; die "ansible-doc cannot read the module's documentation"; }
grep -q 'RETURN VALUES' "$work/doc.txt" || { cat "$work/doc.txt" >&2; die "ansible-doc shows no RETURN VALUES"; }
grep -q 'EXAMPLES' "$work/doc.txt" || die "ansible-doc shows no EXAMPLES"
echo "ansible-doc ok"

step "the module against the fixtures (tests/integrations/ansible/test.yml)"
"$venv/bin/python" - "$work/vars.json" "$bin" "$work/bin" "$work/fixtures" "$work" <<'EOF'
import json, sys
out, binary, bin_dir, fixtures, work = sys.argv[1:]
json.dump(dict(gdrdoctor_bin=binary, bin_dir=bin_dir, fixtures=fixtures, work_dir=work),
          open(out, "w"))
EOF
# The ignored failures print whole reports: keep the log, show the tasks and the recap.
set +e
"$venv/bin/ansible-playbook" -i localhost, -c local \
  -e ansible_python_interpreter="$venv/bin/python" -e "@$work/vars.json" \
  tests/integrations/ansible/test.yml > "$work/test.log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  cat "$work/test.log"
  die "tests/integrations/ansible/test.yml failed (exit $rc)"
fi
grep -E '^(TASK \[|ok: |fatal: |\.\.\.ignoring|PLAY RECAP|localhost +:)' "$work/test.log" | cut -c 1-160

step "the example playbook (packaging/ansible/playbook.yml): ready, not ready, no gdrdoctor"
cat > "$work/inventory.ini" <<EOF
[gpu_nodes]
node-ready gdrdoctor_root=$work/fixtures/healthy-8gpu-roce gdrdoctor_binary=$bin
node-acs gdrdoctor_root=$work/fixtures/acs-redirect-on-path gdrdoctor_binary=$bin
node-no-binary gdrdoctor_root=$work/fixtures/healthy-8gpu-roce gdrdoctor_binary=$work/bin/missing

[all:vars]
ansible_connection=local
ansible_python_interpreter=$venv/bin/python
EOF
"$venv/bin/ansible-playbook" --syntax-check -i "$work/inventory.ini" packaging/ansible/playbook.yml
set +e
"$venv/bin/ansible-playbook" -i "$work/inventory.ini" packaging/ansible/playbook.yml \
  -e gdrdoctor_become=false -e gdrdoctor_gdr_test=false -e gdrdoctor_reports_dir="$work/reports" \
  > "$work/example.log" 2>&1
rc=$?
set -e
cat "$work/example.log"
[ "$rc" -eq 0 ] || die "the example playbook exited $rc"
"$venv/bin/python" - "$work/reports" <<'EOF'
import json, os, sys
d = sys.argv[1]
assert sorted(os.listdir(d)) == ["node-acs.json", "node-ready.json"], os.listdir(d)
ready = json.load(open(d + "/node-ready.json"))
acs = json.load(open(d + "/node-acs.json"))
assert ready["schema"] == "gdrdoctor.report" and ready["verdict"]["ready"] is True, ready["verdict"]
assert acs["verdict"]["ready"] is False, acs["verdict"]
assert acs["verdict"]["blocking"][0]["codes"] == ["acs-redirect-on-path"], acs["verdict"]
print("reports kept: node-acs.json (not ready), node-ready.json (ready); none for node-no-binary")
EOF
last_play=$(sed -n '/^PLAY \[Work that needs GPUDirect RDMA/,/^PLAY RECAP/p' "$work/example.log")
grep -q '^ok: \[node-ready\]' <<<"$last_play" || die "node-ready did not reach the last play"
for h in node-acs node-no-binary; do
  if grep -q "$h" <<<"$last_play"; then die "$h (not ready) reached the last play"; fi
done
grep -q 'node-no-binary: gdrdoctor binary not found' "$work/example.log" ||
  die "the summary does not say that gdrdoctor is missing on node-no-binary"
grep -q 'node-acs: not ready: acs (acs-redirect-on-path)' "$work/example.log" ||
  die "the summary does not give node-acs's verdict"
for h in node-ready node-acs node-no-binary; do
  grep -Eq "^$h +: .* failed=0 " "$work/example.log" || die "$h should be collected, not failed"
done
echo "only node-ready reached the last play"

echo
echo "ansible: all passed"
