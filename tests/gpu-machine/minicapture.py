#!/usr/bin/env python3
"""Copies the sysfs/procfs subset gdrdoctor reads into DIR, links kept as links.

A stopgap for checking "offline results equal live results" on the GPU machine until
`gdrdoctor capture` exists (issue 3). Usage: minicapture.py DIR
"""
import os, shutil, sys

out = sys.argv[1]
seen = set()

def dest(p):
    return os.path.join(out, p.lstrip("/"))

def copy_file(p):
    try:
        with open(p, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return  # unreadable attributes (EINVAL on unused GID slots, write-only files) stay out
    os.makedirs(os.path.dirname(dest(p)), exist_ok=True)
    with open(dest(p), "wb") as f:
        f.write(data)

def copy_link(p):
    target = os.readlink(p)
    os.makedirs(os.path.dirname(dest(p)), exist_ok=True)
    if not os.path.lexists(dest(p)):
        os.symlink(target, dest(p))
    return os.path.realpath(p)

def walk(p, depth, follow=True):
    if p in seen or depth < 0:
        return
    seen.add(p)
    if os.path.islink(p):
        real = copy_link(p)
        if follow and (real.startswith("/sys/") or real.startswith("/proc/")):
            walk(real, depth, follow)
    elif os.path.isdir(p):
        os.makedirs(dest(p), exist_ok=True)
        for name in sorted(os.listdir(p)):
            child = os.path.join(p, name)
            if name in ("driver", "iommu_group", "subsystem", "firmware_node", "iommu", "device") and os.path.islink(child):
                copy_link(child)  # recorded, not followed (device is followed below when needed)
                continue
            walk(child, depth - 1, follow)
    elif os.path.isfile(p):
        copy_file(p)

for f in ["/proc/cmdline", "/proc/modules", "/proc/version", "/proc/sys/kernel/osrelease",
          "/proc/sys/kernel/hostname", "/proc/config.gz"]:
    if os.path.exists(f):
        copy_file(f)
walk("/proc/driver/nvidia", 4)
for name in os.listdir("/sys/bus/pci/devices"):
    walk(os.path.join("/sys/bus/pci/devices", name), 1)
for cls in ["/sys/class/infiniband", "/sys/class/net", "/sys/class/iommu"]:
    if os.path.isdir(cls):
        for name in os.listdir(cls):
            walk(os.path.join(cls, name), 6)
if os.path.isdir("/sys/kernel/iommu_groups"):
    for g in os.listdir("/sys/kernel/iommu_groups"):
        copy_file(f"/sys/kernel/iommu_groups/{g}/type")
for m in os.listdir("/sys/module"):
    os.makedirs(dest(f"/sys/module/{m}"), exist_ok=True)
    if os.path.exists(f"/sys/module/{m}/version"):
        copy_file(f"/sys/module/{m}/version")
walk("/sys/kernel/mm/memory_peers", 3)
print(f"captured into {out}")
