"""`--nproc N`: all_reduce and all_gather across N local processes, results verified.

hccl on npu, nccl on cuda, gloo on cpu. Rank r uses device index r (npu:r, cuda:r). The processes are
started with torch.multiprocessing (spawn) and rendezvous over TCP on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

BACKENDS = {"npu": "hccl", "cuda": "nccl", "cpu": "gloo"}
ELEMENTS = 1024


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def expected(world: int) -> dict[str, Any]:
    """What every rank must see: all_reduce(sum) of (rank+1) * arange, all_gather of rank * ones."""
    return {"all_reduce_factor": world * (world + 1) // 2, "all_gather": list(range(world))}


def set_device(device_type: str, index: int) -> Any:
    """Import torch (and torch_npu on npu) and make device `index` this process's current one; returns torch."""
    import torch

    if device_type == "npu":
        import torch_npu  # noqa: F401

        torch.npu.set_device(index)  # type: ignore[attr-defined]  # torch_npu adds torch.npu when imported
    elif device_type == "cuda":
        torch.cuda.set_device(index)
    return torch


def join_group(device_type: str, master: str, port: int, rank: int, world: int, timeout_s: int) -> Any:
    """Join the process group of `world` ranks at the TCP rendezvous master:port with the device type's backend
    (hccl on npu, nccl on cuda, gloo on cpu); returns torch.distributed."""
    import torch.distributed as dist

    dist.init_process_group(
        BACKENDS[device_type],
        init_method=f"tcp://{master}:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=timeout_s),
    )
    return dist


def _worker(rank: int, world: int, device_type: str, port: int, outdir: str, timeout_s: int) -> None:
    torch = set_device(device_type, rank)
    import torch.distributed as dist

    result: dict[str, Any] = {"rank": rank}
    try:
        join_group(device_type, "127.0.0.1", port, rank, world, timeout_s)
        dev = torch.device("cpu" if device_type == "cpu" else f"{device_type}:{rank}")
        base = torch.arange(ELEMENTS, dtype=torch.float32, device=dev)
        t = base * (rank + 1)
        t0 = time.perf_counter()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        gathered = [torch.empty(ELEMENTS, dtype=torch.float32, device=dev) for _ in range(world)]
        dist.all_gather(gathered, torch.full((ELEMENTS,), float(rank), device=dev))
        dist.barrier()
        elapsed = time.perf_counter() - t0
        want = expected(world)
        reduce_ok = bool(torch.equal(t.cpu(), base.cpu() * want["all_reduce_factor"]))
        gather_values = [float(g[0].cpu()) for g in gathered]
        gather_ok = all(bool(torch.all(g.cpu() == float(i))) for i, g in enumerate(gathered))
        result.update(
            {
                "device": str(t.device),
                "all_reduce_ok": reduce_ok,
                "all_gather_ok": gather_ok,
                "all_gather_values": gather_values,
                "seconds": elapsed,
            }
        )
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - reported back to the parent as the check's failure
        result["error"] = f"{type(exc).__name__}: {exc}"
    Path(outdir, f"rank{rank}.json").write_text(json.dumps(result))


def run_collectives(device_type: str, world: int, timeout_s: int = 120) -> dict[str, Any]:
    """Run the collectives in `world` fresh processes; returns per-rank results and an overall verdict."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="envkit-dist-") as tmp:
        port = free_port()
        error = None
        try:
            mp.start_processes(
                _worker,
                args=(world, device_type, port, tmp, timeout_s),
                nprocs=world,
                join=True,
                start_method="spawn",
            )
        except Exception as exc:  # noqa: BLE001 - a dead rank is a failed check
            error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        ranks = []
        for r in range(world):
            path = Path(tmp, f"rank{r}.json")
            ranks.append(json.loads(path.read_text()) if path.is_file() else {"rank": r, "error": "no result"})
    ok = error is None and all(r.get("all_reduce_ok") and r.get("all_gather_ok") and not r.get("error") for r in ranks)
    return {"ok": ok, "backend": BACKENDS[device_type], "world": world, "ranks": ranks, "error": error}
