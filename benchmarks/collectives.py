#!/usr/bin/env python3
"""Benchmark of `envkit smoke --collectives`: what the harness costs against a bare torch.distributed loop.

In one process group of N processes (gloo on cpu, nccl on cuda, hccl on npu) and for the same sizes, each rank
times all_reduce and all_to_all twice per round: once through the harness (`collectives.bare_seconds`, which builds
the case with `make_case` exactly as the profile does) and once with a plain loop
(`dist.all_reduce(t)` / `dist.all_to_all_single(o, i)` between a barrier and a device sync). The two alternate,
order flipped each round, so machine noise hits both alike. Reported: per op, the sum over sizes of the median
(slowest-rank) times, harness / bare. Target: <= 1.05.

Usage: python benchmarks/collectives.py [--device cpu] [--nproc 4] [--max-size 4MiB] [--rounds 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _bare(torch, dist, op, size, n, dev, sync, warmup, iters):
    count = max(n, size // 4 // n * n)
    if op == "all_reduce":
        t = torch.ones(count, dtype=torch.float32, device=dev)
        call = lambda: dist.all_reduce(t)  # noqa: E731
    else:
        i, o = torch.ones(count, dtype=torch.float32, device=dev), torch.empty(count, dtype=torch.float32, device=dev)
        call = lambda: dist.all_to_all_single(o, i)  # noqa: E731
    for _ in range(warmup):
        call()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    sync()
    return (time.perf_counter() - t0) / iters


def _worker(rank, world, device_type, port, outdir, sizes, rounds):
    from envkit.executor import collectives as C

    torch, dist, dev, sync = C.init_rank(rank, world, device_type, port, 600)
    out = {}
    for op in ("all_reduce", "all_to_all"):
        for size in sizes:
            warmup, iters = C.iterations(size)
            h, b = [], []
            for rnd in range(rounds):
                pair = [
                    ("h", partial(C.bare_seconds, torch, dist, op, size, rank, world, dev, sync, warmup, iters)),
                    ("b", partial(_bare, torch, dist, op, size, world, dev, sync, warmup, iters)),
                ]
                for name, fn in pair if rnd % 2 == 0 else pair[::-1]:
                    (h if name == "h" else b).append(fn())
            out[f"{op}/{size}"] = {"harness": h, "bare": b}
    dist.destroy_process_group()
    Path(outdir, f"rank{rank}.json").write_text(json.dumps(out))


def main() -> int:
    from envkit.executor import collectives as C
    from envkit.executor.dist import free_port

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "npu"])
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--max-size", default="4MiB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch.multiprocessing as mp

    sizes = C.sizes(C.parse_size(args.max_size))
    with tempfile.TemporaryDirectory(prefix="envkit-bench-coll-") as tmp:
        mp.start_processes(
            _worker,
            args=(args.nproc, args.device, free_port(), tmp, sizes, args.rounds),
            nprocs=args.nproc,
            join=True,
            start_method="spawn",
        )
        ranks = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(args.nproc)]
    result = {"device": args.device, "nproc": args.nproc, "sizes": sizes, "rounds": args.rounds, "ops": {}}
    for op in ("all_reduce", "all_to_all"):
        per_size, tot_h, tot_b = [], 0.0, 0.0
        for size in sizes:
            key = f"{op}/{size}"
            # per round, the slowest rank (as the profile reports); then the median over rounds
            h = statistics.median(max(r[key]["harness"][i] for r in ranks) for i in range(args.rounds))
            b = statistics.median(max(r[key]["bare"][i] for r in ranks) for i in range(args.rounds))
            tot_h, tot_b = tot_h + h, tot_b + b
            per_size.append({"size": size, "harness_us": h * 1e6, "bare_us": b * 1e6, "ratio": h / b})
        result["ops"][op] = {"ratio": tot_h / tot_b, "sizes": per_size}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for op, r in result["ops"].items():
            print(f"{op}: harness / bare = {r['ratio']:.3f} (target <= 1.05)")
            for s in r["sizes"]:
                print(
                    f"  {C.human(s['size']):>8}  harness {s['harness_us']:10.1f} us  bare {s['bare_us']:10.1f} us  x{s['ratio']:.3f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
