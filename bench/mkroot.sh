#!/bin/sh
# Write the large synthetic benchmark root (~300 PCI functions, 8 GPUs, 8 dual-port NICs) into DIR.
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
exec python3 "$(dirname "$0")/../fixtures/synth/synth.py" --bench "$1"
