#!/usr/bin/env python3
"""Resolver speed, measured against baselines in the same run.

1. In-process: the median time of one `resolve` over every chip x torch request (target < 20 ms).
2. Whole process: `envkit resolve -o -` wall time as a ratio to `python -c "import pydantic, yaml"`
   (target <= 2: resolve imports neither docker, ansible nor torch).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envkit.matrix import load_matrix  # noqa: E402
from envkit.resolve import pins_from_mapping, solve  # noqa: E402


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


def wall(cmd: list[str], runs: int = 7) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    median, worst, n, solved = in_process()
    print(f"in-process resolve: {n} chip x torch requests ({solved} resolvable), median {median * 1000:.2f} ms, "
          f"worst {worst * 1000:.2f} ms (target < 20 ms median)")
    base = wall([sys.executable, "-c", "import pydantic, yaml"])
    env_cmd = [sys.executable, "-m", "envkit", "resolve", "-o", "-"]
    full = wall(env_cmd)
    print(f"baseline `python -c 'import pydantic, yaml'`: {base * 1000:.0f} ms")
    print(f"`envkit resolve -o -`: {full * 1000:.0f} ms")
    print(f"ratio: {full / base:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
