#!/usr/bin/env python3
"""Writes a realistic NCCL_DEBUG=INFO log of SIZE bytes (bench/nccl-log.sh).

A job of NODES nodes x 8 GPUs on NCCL 2.21 with InfiniBand, as NCCL prints it
(src/debug.cc prefix `host:pid:tid [dev] NCCL INFO`), the ranks' lines interleaved the way a
launcher merges them: init, the NIC list and GDR decisions (NET subsystem), topology, rings and
trees, P2P and NET connections of 16 channels, tuning tables, then the application's own output
between collectives. One communicator after another (data, tensor and pipeline parallel groups
are many communicators over the same ranks), until SIZE bytes. On one node the GPUs of the
second socket are too far from the NIC for GDR, so the explanation has something to find.

    bench/nccl-log.py OUT SIZE_MIB [NODES]
"""

import random
import sys

out_path, size_mib = sys.argv[1], int(sys.argv[2])
nodes = int(sys.argv[3]) if len(sys.argv) > 3 else 16
target = size_mib << 20
rng = random.Random(17)

BUS = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"]
hosts = [f"gpu-node-{n:03}" for n in range(nodes)]
far_node = 3  # GPUs 4-7 of this node are at SYS from their NIC


def prefix(n, g, tid):
    return f"{hosts[n]}:{40000 + n * 8 + g}:{tid} [{g}] NCCL INFO "


def rank_lines(n, g, comm, nranks):
    """What one rank prints for one communicator."""
    r = n * 8 + g
    tid = 41000 + g + comm % 7
    p = prefix(n, g, tid)
    lines = []
    if comm == 0:
        lines += [
            f"{p}Bootstrap : Using eth0:10.1.{n}.{g + 10}<0>",
            f"{p}cudaDriverVersion 12040",
            f"{p}NCCL version 2.21.5+cuda12.4",
            f"{p}Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
            f"{p}P2P plugin IBext_v8",
            f"{p}NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP [2]mlx5_2:1/IB/SHARP [3]mlx5_3:1/IB/SHARP [4]mlx5_4:1/IB/SHARP [5]mlx5_5:1/IB/SHARP [6]mlx5_6:1/IB/SHARP [7]mlx5_7:1/IB/SHARP [RO]; OOB eth0:10.1.{n}.{g + 10}<0>",
            f"{p}Using non-device net plugin version 0",
            f"{p}Using network IBext_v8",
            f"{p}DMA-BUF is available on GPU device {g}",
        ]
    lines.append(
        f"{p}ncclCommInitRank comm 0x{0x55d0c0000000 + comm * 0x1000 + r:x} rank {r} nranks {nranks} cudaDev {g} nvmlDev {g} busId {BUS[g]} commId 0x{comm * 7919 + 12345:x} - Init START"
    )
    for h in range(8):
        lines.append(f"{p}NET/IBext_v8 : GPU Direct RDMA Enabled for HCA {h} 'mlx5_{h}'")
    far = n == far_node and g >= 4
    lines.append(
        f"{p}GPU Direct RDMA {'Disabled' if far else 'Enabled'} for GPU {BUS[g]} / HCA {g:x} (distance {7 if far else 4} {'>' if far else '<='} 4){'' if far else ', read 1'}"
    )
    lines += [
        f"{p}Setting affinity for GPU {g} to ffff,ffffffff",
        f"{p}NVLS multicast support is not available on dev {g}",
        f"{p}comm 0x{0x55d0c0000000 + comm:x} rank {r} nRanks {nranks} nNodes {nodes} localRanks 8 localRank {g} MNNVL 0",
        f"{p}Trees [0] {r + 1}/-1/-1->{r}->{r - 1} [1] {r + 1}/-1/-1->{r}->{r - 1}",
        f"{p}P2P Chunksize set to 524288",
    ]
    for c in range(16):
        nxt = n * 8 + (g + 1) % 8
        lines.append(f"{p}Channel {c:02d}/0 : {r}[{g}] -> {nxt}[{(g + 1) % 8}] via P2P/CUMEM/read")
    if g == 0 or g == 7:
        peer_node = (n + 1) % nodes if g == 7 else (n - 1) % nodes
        peer = peer_node * 8 + (0 if g == 7 else 7)
        dirn = "send" if g == 7 else "receive"
        gdr = "" if far else "/GDRDMA"
        for c in range(16):
            src, dst = (r, peer) if dirn == "send" else (peer, r)
            lines.append(
                f"{p}Channel {c:02d}/0 : {src}[{src % 8}] -> {dst}[{dst % 8}] [{dirn}] via NET/IBext_v8/{g}{gdr}"
            )
    lines += [
        f"{p}Connected all rings, use ring PXN 0 GDR 1",
        f"{p}Connected all trees",
        f"{p}threadThresholds 8/8/64 | 1024/8/64 | 512 | 512",
        f"{p}16 coll channels, 16 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
        f"{p}TUNER/Plugin: Could not find: libnccl-tuner.so. Using internal tuner plugin.",
        f"{p}ncclCommInitRank comm 0x{0x55d0c0000000 + comm * 0x1000 + r:x} rank {r} nranks {nranks} cudaDev {g} nvmlDev {g} busId {BUS[g]} commId 0x{comm * 7919 + 12345:x} - Init COMPLETE",
        f"{p}Init timings - ncclCommInitRank: rank {r} nranks {nranks} total 1.{rng.randrange(100):02d} (kernels 0.21, alloc 0.05, bootstrap 0.33, allgathers 0.02, topo 0.30, graphs 0.01, connections 0.08, rest 0.00)",
    ]
    return lines


def block(comm):
    """All ranks of one communicator, interleaved as a launcher merges them, with the
    application's own lines between."""
    per_rank = [rank_lines(n, g, comm, nodes * 8) for n in range(nodes) for g in range(8)]
    out = []
    while any(per_rank):
        live = [q for q in per_rank if q]
        q = live[rng.randrange(len(live))]
        for _ in range(rng.randrange(1, 4)):
            if q:
                out.append(q.pop(0))
        if rng.randrange(40) == 0:
            out.append(f"[rank{rng.randrange(nodes * 8)}]: step {comm}, loss {rng.random():.4f}, lr 3.0e-04, tokens/s {rng.randrange(90000, 120000)}")
    return "\n".join(out) + "\n"


written = 0
comm = 0
with open(out_path, "w") as f:
    while written < target:
        b = block(comm)
        f.write(b)
        written += len(b)
        comm += 1
print(f"{out_path}: {written} bytes, {comm} communicators, {nodes} nodes x 8 GPUs")
