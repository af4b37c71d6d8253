#!/usr/bin/env bash
# Try one fixture's fix script against a copy of it, with the stand-ins (tests/fixes/README.md).
#
#   tests/fixes/try.sh FIXTURE_DIR WORK_DIR [GDRDOCTOR]
#
# FIXTURE_DIR: a built fixture (fixtures/build.sh NAME DIR); WORK_DIR: new or empty, gets
# copy/ (the node root the script changes), stand/ (the symlinks), s.sh (the script),
# before.txt / after.txt (`check` of the copy), run1.txt / run2.txt (the script's output) and
# tree1 / tree2 (sha256 of every file after each run). Exit 0 when the second run changed
# nothing, 1 when it did.
#
# TRY_PATCH_EMPTY=1 puts `:` at the start of every fix_N() body before running: a block whose
# commands were all done in an earlier block is otherwise `fix_N() { # comments }`, which bash
# refuses as a syntax error (the script stops there, exit 2); see README.md.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
fixture=$1 work=$2
gd=${3:-$here/../../target/release/gdrdoctor}
gd=$(cd "$(dirname "$gd")" && pwd)/$(basename "$gd")
if [ -e "$work" ] && [ -n "$(ls -A "$work" 2>/dev/null)" ]; then
  echo "try.sh: $work is not empty" >&2
  exit 2
fi
mkdir -p "$work/stand"
work=$(cd "$work" && pwd)
cp -a "$fixture" "$work/copy"
for n in $(python3 "$here/standin.py" --names); do ln -s "$here/standin.py" "$work/stand/$n"; done
"$gd" --root "$work/copy" fix --class every --warnings > "$work/s.sh"
if [ "${TRY_PATCH_EMPTY:-}" = 1 ]; then
  sed -i -E 's/^(fix_[0-9]+\(\) \{)$/\1 :/' "$work/s.sh"
fi
"$gd" --root "$work/copy" check > "$work/before.txt" 2>&1
tree() { (cd "$work/copy" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
run() {
  GDRDOCTOR_ROOT="$work/copy" GDRDOCTOR="$gd" PATH="$work/stand:/usr/bin:/bin" bash "$work/s.sh"
}
run > "$work/run1.txt" 2>&1
echo "run 1: exit $?" >> "$work/run1.txt"
tree > "$work/tree1"
"$gd" --root "$work/copy" check > "$work/after.txt" 2>&1
run > "$work/run2.txt" 2>&1
echo "run 2: exit $?" >> "$work/run2.txt"
tree > "$work/tree2"
if cmp -s "$work/tree1" "$work/tree2"; then
  echo "$work: second run changed nothing"
else
  echo "$work: second run changed:"
  diff "$work/tree1" "$work/tree2" | sed 's/^/  /'
  exit 1
fi
