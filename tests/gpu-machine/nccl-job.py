"""A job's NCCL, as tests/gpu-machine/jobs.sh runs it: W ranks (one process and GPU each; W is
min(2, GPUs)), each timing N communicator inits: a new NCCL group and its first all-reduce
(which makes the connections NCCL logs), synchronised. With W=2, P2P and SHM are off, so the
ranks talk over NCCL's network (Socket on a machine without an RDMA NIC). Prints one JSON
object: the per-init milliseconds of every rank, and the sum checked.
Usage: python3 nccl-job.py N PORT"""
import json, os, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def rank_main(rank, world, n, port, q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    x = torch.ones(1 << 20, device="cuda")
    times, ok = [], True
    for _ in range(n):
        t = time.perf_counter()
        g = dist.new_group(list(range(world)), backend="nccl")
        y = x.clone()
        dist.all_reduce(y, group=g)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1000)
        ok = ok and bool(torch.all(y == world).item())
        dist.destroy_process_group(g)
    q.put({"rank": rank, "ms": times, "sum_ok": ok, "pid": os.getpid()})
    dist.destroy_process_group()


if __name__ == "__main__":
    n, port = int(sys.argv[1]), int(sys.argv[2])
    world = min(2, torch.cuda.device_count())
    if world > 1:
        os.environ.setdefault("NCCL_P2P_DISABLE", "1")
        os.environ.setdefault("NCCL_SHM_DISABLE", "1")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, world, n, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    res = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    print(json.dumps({"world": world, "ranks": sorted(res, key=lambda r: r["rank"]),
                      "nccl": ".".join(map(str, torch.cuda.nccl.version()))}))
