#!/usr/bin/env python3
"""Start-up cost of the fast commands, against `python -c "import yaml"` measured in the same run (issue 26).

Whole processes, as a user runs them (the venv's `envkit` script, interpreter start included), medians of
--runs rounds (at least 10) with every command taking its turn in each round, so that load from other work hits
them alike; one warm-up round first (the matrix cache, the bytecode). The CPU time ratio is printed beside the
wall time ratio: it moves less with the other core's load. Bytecode is cached as for an installed envkit (a
temporary PYTHONPYCACHEPREFIX), whatever PYTHONDONTWRITEBYTECODE says.

  envkit resolve -o -            target <= 3x
  envkit validate LOCK           target <= 3x
  envkit bundle verify DIR       (the smallest bundle `bundle build` makes: no target set; printed for the record)
  envkit --help                  target <= 5x

Setup (once, cached under --workdir): a lock resolved for this machine, locked `--only pyyaml` against PyPI, and
built into a bundle folder (pyyaml and envkit's own controller closure: about 110 MB, so that verify's figure
includes hashing them). A benchmark reports: it exits 0 whether or not the targets are met.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from resolve import interleaved  # noqa: E402  (the same interleaved medians the resolver benchmark uses)

TARGETS = {"resolve": 3.0, "validate": 3.0, "bundle verify": None, "--help": 5.0}


def envkit_cmd() -> list[str]:
    script = Path(sys.executable).parent / "envkit"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "envkit"]


def prepare(work: Path, refresh: bool) -> tuple[Path, Path]:
    """A resolved, locked lock and a small bundle folder built from it; cached in `work`."""
    from envkit.artifacts.closure import host_arch, host_python

    ek = envkit_cmd()
    lock, bundle = work / "envkit.lock", work / "bundle"
    stale = lock.is_file() and subprocess.run([*ek, "validate", str(lock)], capture_output=True).returncode != 0
    if refresh or stale:  # a lock from an earlier matrix no longer validates: made again
        shutil.rmtree(work, ignore_errors=True)
    if not (lock.is_file() and (bundle / "manifest.json").is_file()):
        work.mkdir(parents=True, exist_ok=True)
        print("setup: resolve, lock --only pyyaml (PyPI) and bundle build, once ...", flush=True)
        for cmd in (
            [*ek, "-q", "resolve", "--python", host_python(), "--arch", host_arch(), "-o", str(lock)],
            [*ek, "-q", "lock", "--lock", str(lock), "--only", "pyyaml"],
            [*ek, "-q", "bundle", "build", "--lock", str(lock), "-o", str(bundle), "--force"],
        ):
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
            if r.returncode != 0:
                raise SystemExit(f"setup failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return lock, bundle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10, help="rounds (at least 10)")
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp/envkit-bench-startup"))
    ap.add_argument("--refresh", action="store_true", help="redo the setup")
    args = ap.parse_args()
    runs = max(10, args.runs)
    lock, bundle = prepare(args.workdir, args.refresh)
    ek = envkit_cmd()
    cmds = {
        "baseline": [sys.executable, "-c", "import yaml"],
        "resolve": [*ek, "resolve", "-o", "-"],
        "validate": [*ek, "validate", str(lock)],
        "bundle verify": [*ek, "bundle", "verify", str(bundle)],
        "--help": [*ek, "--help"],
    }
    # as installed: bytecode cached (a temporary PYTHONPYCACHEPREFIX; the warm-up round writes it), even where this
    # shell sets PYTHONDONTWRITEBYTECODE
    with tempfile.TemporaryDirectory(prefix="envkit-bench-pycache-") as prefix:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPYCACHEPREFIX": prefix}
        results = dict(zip(cmds, interleaved(list(cmds.values()), runs=runs, env=env), strict=True))
    base_wall, base_cpu = results["baseline"]
    print(f"startup, medians of {runs} interleaved rounds ({sys.executable}):")
    label = 'python -c "import yaml"'
    print(f"  {label:<28} {base_wall * 1000:7.1f} ms wall {base_cpu * 1000:7.1f} ms CPU  (baseline)")
    for name, (wall, cpu) in results.items():
        if name == "baseline":
            continue
        target = TARGETS[name]
        ratio = wall / base_wall
        verdict = "" if target is None else ("  meets" if ratio <= target else "  MISSES") + f" target <= {target:g}x"
        print(
            f"  {'envkit ' + name:<28} {wall * 1000:7.1f} ms wall {cpu * 1000:7.1f} ms CPU  "
            f"= {ratio:5.2f}x wall, {cpu / base_cpu:5.2f}x CPU{verdict}"
        )


if __name__ == "__main__":
    main()
