#!/usr/bin/env bash
# Builds the RPM from a built binary with rpmbuild -bb (no compilation):
#   packaging/rpm/build.sh [BINARY] [OUTDIR]      (defaults: target/release/gdrdoctor, target/pkg)
# Prints the path of the .rpm. Units go to /usr/lib/systemd/system (RPM distributions' place).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$(realpath "${1:-${CARGO_TARGET_DIR:-$repo/target}/release/gdrdoctor}")
out=$(realpath -m "${2:-${CARGO_TARGET_DIR:-$repo/target}/pkg}")
mkdir -p "$out"
version=$("$bin" --version | awk '{print $2}')
top=$(mktemp -d); trap 'rm -rf "$top"' EXIT
stage=$top/stage
"$repo/packaging/stage.sh" "$bin" "$stage"
mkdir -p "$stage/usr/lib/systemd"
mv "$stage/lib/systemd/system" "$stage/usr/lib/systemd/system"
rm -rf "${stage:?}/lib"
rpmbuild -bb --quiet \
  --define "_topdir $top/rpmbuild" \
  --define "gdr_version $version" \
  --define "gdr_stage $stage" \
  --define "_build_id_links none" \
  --define "__strip /bin/true" \
  --define "__os_install_post %{nil}" \
  "$here/gdrdoctor.spec" >/dev/null
rpm=$(find "$top/rpmbuild/RPMS" -name '*.rpm' | head -1)
cp "$rpm" "$out/"
echo "$out/$(basename "$rpm")"
