#!/usr/bin/env python3
"""Resolver speed, measured against baselines in the same run.

1. In-process: the median time of one `resolve` over every chip x torch request (target < 20 ms).
2. Whole process: `envkit resolve -o -` wall time as a ratio to `python -c "import pydantic, yaml"`
   (target <= 2: resolve imports neither docker, ansible nor torch), medians of interleaved runs; the CPU time
   ratio beside it moves less with load from other work. Where PYTHONDONTWRITEBYTECODE is set, it is measured
   again with the bytecode cached (in a temporary PYTHONPYCACHEPREFIX), as an installed envkit runs.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envkit.core.matrix import load_matrix  # noqa: E402
from envkit.core.resolve import pins_from_mapping, solve  # noqa: E402


def in_process() -> tuple[float, float, int, int]:
    lm = load_matrix()
    torches = sorted({t.torch for t in lm.model.torch_npu})
    times: list[float] = []
    solved = 0
    for chip in lm.chips:
        for torch in torches:
            pins = pins_from_mapping(lm, {"chip": chip, "torch": torch})
            t0 = time.perf_counter()
            res = solve(lm, pins)
            times.append(time.perf_counter() - t0)
            solved += res is not None
    return statistics.median(times), max(times), len(times), solved


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def interleaved(cmds: list[list[str]], runs: int = 9, env: dict[str, str] | None = None) -> list[tuple[float, float]]:
    """Median (wall, CPU) seconds per command, the commands taking turns so that load from other work hits
    them alike. One warm-up run each first (the matrix cache, and the bytecode cache where one is used)."""
    samples: list[list[tuple[float, float]]] = [[] for _ in cmds]
    for i in range(runs + 1):
        for cmd, out in zip(cmds, samples, strict=True):
            c0, t0 = _cpu(), time.perf_counter()
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
            if i:
                out.append((time.perf_counter() - t0, _cpu() - c0))
    return [(statistics.median(w for w, _ in s), statistics.median(c for _, c in s)) for s in samples]


def main() -> None:
    median, worst, n, solved = in_process()
    print(
        f"in-process resolve: {n} chip x torch requests ({solved} resolvable), median {median * 1000:.2f} ms, "
        f"worst {worst * 1000:.2f} ms (target < 20 ms median)"
    )
    base_cmd = [sys.executable, "-c", "import pydantic, yaml"]
    env_cmd = [sys.executable, "-m", "envkit", "resolve", "-o", "-"]
    (base, base_cpu), (full, full_cpu) = interleaved([base_cmd, env_cmd])
    print(f"baseline `python -c 'import pydantic, yaml'`: {base * 1000:.0f} ms (CPU {base_cpu * 1000:.0f} ms)")
    print(f"`envkit resolve -o -`: {full * 1000:.0f} ms (CPU {full_cpu * 1000:.0f} ms)")
    print(f"ratio: {full / base:.2f} (target <= 2; CPU time ratio {full_cpu / base_cpu:.2f})")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        # This shell compiles envkit from source on every start; an installed envkit has its bytecode cached.
        with tempfile.TemporaryDirectory(prefix="envkit-bench-pycache-") as prefix:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = prefix
            (base, base_cpu), (full, full_cpu) = interleaved([base_cmd, env_cmd], env=env)
        print(
            f"with bytecode cached (as installed; PYTHONDONTWRITEBYTECODE is set here): baseline {base * 1000:.0f} ms, "
            f"envkit {full * 1000:.0f} ms, ratio {full / base:.2f} (CPU {full_cpu / base_cpu:.2f})"
        )


if __name__ == "__main__":
    main()
