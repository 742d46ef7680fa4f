#!/usr/bin/env python3
"""`make test`: the whole suite, with the image tests (Podman) and the fleet tests (systemd-nspawn) each in a pytest
session of its own beside the rest.

Both are the longest parts of the suite and spend much of it waiting: the image tests on the engine (layer commits,
image save and load), the fleet tests on boots, SSH and Ansible. Side by side, the suite's wall time is about the
longest of the three instead of their sum.

- The image session runs when the Podman set-up is in the environment (DOCKER_HOST, CONTAINERS_CONF,
  ENVKIT_TEST_BASE): `tests/image -m podman`. It is the only session that sees that set-up: the others run with it
  taken out of their environment, so their session-end clean-up (tests/conftest.py removes the images a session
  made) can never remove an image the image session is building.
- The fleet session runs as root unless ENVKIT_SKIP_NSPAWN=1: `-m nspawn` (its tests boot one fleet at a time, with
  fixed names, so no other session may boot one; none does).
- The rest: `-m "not podman and not nspawn"`, each part only where its side session runs.
- Each side session has its own --basetemp; its output goes to a file and is printed after the rest's, so none
  interleave.
- Exit status: the first failing session's (pytest's 5, "no test collected", counts as a pass for a side session).
- One session as before with ENVKIT_TEST_SPLIT=0, or when the arguments select tests themselves (-m, -k, a path, a
  node id).

Usage: python tools/run_tests.py [pytest arguments]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
PODMAN_ENV = ("DOCKER_HOST", "CONTAINERS_CONF", "ENVKIT_TEST_BASE", "ENVKIT_TEST_BASE_ARM64")


class Side(NamedTuple):
    """A session beside the rest: its name, the folders it collects from (none: all), the marker of its tests (the
    rest runs without them), whether it sees the Podman set-up."""

    name: str
    paths: tuple[str, ...]
    marker: str
    podman: bool


IMAGE = Side("the image tests (Podman)", ("tests/image",), "podman", podman=True)
FLEET = Side("the fleet tests (systemd-nspawn)", (), "nspawn", podman=False)


def selects(args: list[str]) -> bool:
    """Whether the arguments choose tests themselves (a marker or keyword expression, a path or node id)."""
    for a in args:
        if a in ("-m", "-k") or (a.startswith(("-m", "-k")) and not a.startswith("--")):
            return True
        if not a.startswith("-") and (ROOT / a.split("::")[0]).exists():
            return True
    return False


def sides(args: list[str], env: dict[str, str], root: bool) -> list[Side]:
    """The sessions that run beside the rest (none: one session as before)."""
    if env.get("ENVKIT_TEST_SPLIT") == "0" or selects(args):
        return []
    out = []
    if all(env.get(k) for k in PODMAN_ENV[:3]):
        out.append(IMAGE)
    if root and env.get("ENVKIT_SKIP_NSPAWN") != "1":
        out.append(FLEET)
    return out


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    env = dict(os.environ)
    beside = sides(args, env, os.geteuid() == 0)
    if not beside:
        return subprocess.call([*pytest, *args], cwd=ROOT)
    work = Path(tempfile.mkdtemp(prefix="envkit-side-tests-"))
    without_podman = {k: v for k, v in env.items() if k not in PODMAN_ENV}
    running: list[tuple[Side, Path, subprocess.Popen]] = []
    try:
        try:
            for n, side in enumerate(beside):
                log = work / f"{n}.log"
                select = [*side.paths, "-m", side.marker]
                cmd = [*pytest, *select, "-p", "no:cacheprovider", f"--basetemp={work / f'{n}.tmp'}", *args]
                with open(log, "wb") as out:
                    p = subprocess.Popen(
                        cmd, cwd=ROOT, env=env if side.podman else without_podman, stdout=out, stderr=subprocess.STDOUT
                    )
                running.append((side, log, p))
                print(f"== {side.name} run beside the suite, in a session of their own: {log}", flush=True)
            rest = " and ".join(f"not {s.marker}" for s in beside)
            rc = subprocess.call([*pytest, "-m", rest, *args], cwd=ROOT, env=without_podman)
        except BaseException:  # interrupted: the side sessions go too
            for _, _, p in running:
                p.terminate()
                p.wait()
            raise
        for side, log, p in running:
            side_rc = p.wait()
            print(f"== {side.name}, the session beside the suite:", flush=True)
            sys.stdout.buffer.write(log.read_bytes())
            sys.stdout.flush()
            rc = rc or (0 if side_rc == 5 else side_rc)
        return rc
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
