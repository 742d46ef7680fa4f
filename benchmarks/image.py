#!/usr/bin/env python3
"""Image benchmark: final size against the sum of its parts, and a Python-only rebuild against the first build.

Needs the engine of tests/integration/setup/podman.sh (DOCKER_HOST, ENVKIT_TEST_BASE) and the inputs the
podman integration test leaves behind (wheelhouse in $ENVKIT_PODMAN_WORK); run that test first:
    eval "$(tests/integration/setup/podman.sh)"; pytest tests/image -m podman; python benchmarks/image.py
Prints: image size / (base + /usr/local/Ascend + venv), and rebuild seconds / first-build seconds (target <= 0.3).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envkit.executor.docker import Engine  # noqa: E402
from envkit.export.templates import write_context  # noqa: E402
from envkit.jobs.image import plan_lock  # noqa: E402
from envkit.lock.file import parse_lock  # noqa: E402

WORK = Path(os.environ.get("ENVKIT_PODMAN_WORK", "/var/tmp/envkit-podman"))


def _du(eng: Engine, tag: str, path: str) -> int:
    rc, out = eng.run(tag, ["du", "-sb", path], user="root")
    return int(out.split()[0]) if rc == 0 else 0


def _build(eng: Engine, lock: dict, arts: Path, base: str, tag: str, nocache: bool) -> float:
    plan = plan_lock(parse_lock(lock, {}, "bench.lock"), generated_by="benchmarks/image.py", base=base, artifacts=arts)
    with tempfile.TemporaryDirectory(prefix="image-bench-") as ctx:
        write_context(plan, Path(ctx))
        t0 = time.monotonic()
        eng.build(Path(ctx), tag, nocache=nocache)
        return time.monotonic() - t0


def main() -> int:
    base = os.environ.get("ENVKIT_TEST_BASE")
    lock_file = WORK / "bench" / "envkit.lock"
    arts = WORK / "bench" / "artifacts"
    # the Python-only change: the same lock but another accelerate pin (and its wheel in artifacts2/wheels)
    lock2_file = WORK / "bench" / "envkit2.lock"
    arts2 = WORK / "bench" / "artifacts2"
    if not base or not lock_file.exists() or not lock2_file.exists():
        print("run the podman integration test first (it leaves the benchmark inputs in $ENVKIT_PODMAN_WORK/bench)")
        return 2
    eng = Engine()
    lock = yaml.safe_load(lock_file.read_text())
    first = _build(eng, lock, arts, base, "localhost/envkit-bench:first", nocache=True)
    lock2 = yaml.safe_load(lock2_file.read_text())
    second = _build(eng, lock2, arts2, base, "localhost/envkit-bench:second", nocache=False)
    tag = "localhost/envkit-bench:first"
    size = eng.inspect(tag)["Size"]
    base_size = eng.inspect(base)["Size"]
    parts = base_size + _du(eng, tag, "/usr/local/Ascend") + _du(eng, tag, "/opt/envkit/venv")
    result = {
        "image_bytes": size,
        "parts_bytes": parts,
        "size_ratio": round(size / parts, 3),
        "first_build_s": round(first, 1),
        "python_only_rebuild_s": round(second, 1),
        "python_only_change": f"accelerate {lock['stack']['accelerate']} -> {lock2['stack']['accelerate']}",
        "rebuild_ratio": round(second / first, 3),
        "rebuild_target": 0.3,
    }
    print(json.dumps(result, indent=2))
    return 0 if result["rebuild_ratio"] <= 0.3 else 1


if __name__ == "__main__":
    sys.exit(main())
