#!/usr/bin/env python3
"""`envkit scan` on a project of 1,000 Python files, against parsing those files alone in the same run (#39).

The project is generated in a temporary folder: copies of the test GPT trainer (tests/fixtures/projects/gpt-trainer,
~110 lines, a CUDA-ism every few lines) with their names and numbers varied, in nested packages, plus a
requirements file. The baseline reads and `ast.parse`s every file (what any AST scanner must do at least); the scan
is the library call the command line makes (walk, safe reads, rules, dependency files, classification). The ratio
scan / baseline says what the rules cost over the parse. A benchmark reports: it exits 0 whatever the figures.

    python benchmarks/scan.py [--files 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envkit.jobs.scan import ScanRequest, scan  # noqa: E402

TRAINER = ROOT / "tests" / "fixtures" / "projects" / "gpt-trainer"


def best_of(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def make_project(folder: Path, files: int) -> list[Path]:
    sources = [(TRAINER / name).read_text() for name in ("train.py", "model.py", "device_utils.py")]
    written = []
    for i in range(files):
        package = folder / f"pkg{i % 20:02d}" / f"sub{i % 7}"
        package.mkdir(parents=True, exist_ok=True)
        text = sources[i % 3].replace("batch_size = 12", f"batch_size = {12 + i}").replace("GPT", f"GPT{i}")
        path = package / f"module_{i:04d}.py"
        path.write_text(text + f"\n\ndef extra_{i}(x):\n    return x * {i}\n")
        written.append(path)
    (folder / "requirements.txt").write_text("torch>=2.1\nflash-attn>=2.5\ndeepspeed>=0.12\ntransformers>=4.40\n")
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-scan-bench-") as tmp:
        folder = Path(tmp)
        paths = make_project(folder, args.files)
        lines = sum(p.read_text().count("\n") for p in paths)

        def parse_only() -> None:
            for p in paths:
                ast.parse(p.read_bytes(), filename=str(p))

        result = scan(ScanRequest(path=folder))  # warm: the table loads once per process
        parse = best_of(args.runs, parse_only)
        full = best_of(args.runs, lambda: scan(ScanRequest(path=folder)))
        counts = result.counts()
        print(f"project: {len(paths)} Python files, {lines} lines, 1 requirements file")
        print(f"findings: {counts['block']} block, {counts['warn']} warn, {counts['info']} info")
        print(f"baseline (read + ast.parse every file): {parse:.2f} s")
        print(f"envkit scan:                            {full:.2f} s  ({full / parse:.2f}x the parse alone)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
