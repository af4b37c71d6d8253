#!/usr/bin/env bash
# Builds the Debian package from a built binary, with dpkg-deb alone (no debhelper):
#   packaging/deb/build.sh [BINARY] [OUTDIR]      (defaults: target/release/gdrdoctor, target/pkg)
# Prints the path of the .deb. The dependencies are computed from the binary: libc6 at the
# newest GLIBC symbol version it uses, and libgcc-s1 (unwinding); nothing else is linked
# (libibverbs, CUDA, NVML and ROCm are loaded at run time when present).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$(realpath "${1:-${CARGO_TARGET_DIR:-$repo/target}/release/gdrdoctor}")
out=$(realpath -m "${2:-${CARGO_TARGET_DIR:-$repo/target}/pkg}")
mkdir -p "$out"

version=$("$bin" --version | awk '{print $2}')
arch=$(dpkg --print-architecture)
glibc=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
root=$stage/root
"$repo/packaging/stage.sh" "$bin" "$root"

mkdir -p "$root/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: gdrdoctor
Version: $version-1
Architecture: $arch
Maintainer: gdrdoctor developers <gdrdoctor@localhost>
Installed-Size: $size
Depends: libc6 (>= $glibc), libgcc-s1
Suggests: libibverbs1, ibverbs-providers, slurm-client, prometheus-node-exporter
Section: admin
Priority: optional
Description: is this GPU node ready for GPUDirect RDMA?
 gdrdoctor tells an operator in seconds whether NICs can read and write GPU
 memory directly on this node (GPUDirect RDMA), and if not, what exactly is
 wrong and which commands fix it: peer-memory modules and the DMA-BUF path,
 PCIe placement and ACS between every GPU and NIC, the IOMMU, RDMA links and
 GID tables, device access, and a verified RDMA write test per GPU-NIC pair.
 .
 This package also ships a boot-time systemd unit, a metrics timer for
 node_exporter, a Slurm prolog, an NHC check, an Ansible module and a
 Kubernetes DaemonSet example.
CONTROL
echo /etc/default/gdrdoctor > "$root/DEBIAN/conffiles"
cat > "$root/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
# New unit files: tell systemd. Nothing is enabled or started: see /usr/share/doc/gdrdoctor.
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
# The job journal's directories (docs/jobs.md), made now rather than at the next boot.
if [ "$1" = configure ]; then
  systemd-tmpfiles --create /usr/lib/tmpfiles.d/gdrdoctor.conf >/dev/null 2>&1 || true
fi
POSTINST
cat > "$root/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
POSTRM
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm"
deb=$out/gdrdoctor_${version}-1_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
