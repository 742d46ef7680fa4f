#!/usr/bin/env python3
"""`make test`: the whole suite, with the image tests (Podman) in a pytest session of their own beside the rest.

The image tests are the longest part of the suite (half an hour on 2 cores) and spend much of it in the engine
(layer commits, image save and load); the fleet tests spend theirs waiting on boots, SSH and Ansible. Side by side,
the suite's wall time is about the longer of the two instead of their sum.

- The image session is the only one that sees the Podman set-up (DOCKER_HOST, CONTAINERS_CONF, ENVKIT_TEST_BASE*):
  the other runs with it taken out of its environment, so its session-end clean-up (tests/conftest.py removes the
  images a session made) can never remove an image the image session is building. It has its own --basetemp.
- Its output goes to a file and is printed after the other session's, so the two never interleave.
- Exit status: the first failing session's (pytest's 5, "no test collected", counts as a pass for the image
  session: without root or Podman its tests are skipped at collection).
- One session as before when the Podman set-up is absent, with ENVKIT_TEST_SPLIT=0, or when the arguments select
  tests themselves (-m, -k, a path, a node id).

Usage: python tools/run_tests.py [pytest arguments]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PODMAN_ENV = ("DOCKER_HOST", "CONTAINERS_CONF", "ENVKIT_TEST_BASE", "ENVKIT_TEST_BASE_ARM64")
IMAGE_TESTS = "tests/image"


def selects(args: list[str]) -> bool:
    """Whether the arguments choose tests themselves (a marker or keyword expression, a path or node id)."""
    for a in args:
        if a in ("-m", "-k") or (a.startswith(("-m", "-k")) and not a.startswith("--")):
            return True
        if not a.startswith("-") and (ROOT / a.split("::")[0]).exists():
            return True
    return False


def split(args: list[str], env: dict[str, str]) -> bool:
    return env.get("ENVKIT_TEST_SPLIT") != "0" and all(env.get(k) for k in PODMAN_ENV[:3]) and not selects(args)


def main(args: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    env = dict(os.environ)
    if not split(args, env):
        return subprocess.call([*pytest, *args], cwd=ROOT)
    work = Path(tempfile.mkdtemp(prefix="envkit-image-tests-"))
    try:
        log = work / "log"
        with open(log, "wb") as out:
            image = subprocess.Popen(
                [*pytest, IMAGE_TESTS, "-m", "podman", "-p", "no:cacheprovider", f"--basetemp={work / 'tmp'}", *args],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            print(f"== the image tests (Podman) run beside the suite, in a session of their own: {log}", flush=True)
            rest_env = {k: v for k, v in env.items() if k not in PODMAN_ENV}
            try:
                rest = subprocess.call([*pytest, "-m", "not podman", *args], cwd=ROOT, env=rest_env)
            except BaseException:  # interrupted: the image session goes too
                image.terminate()
                image.wait()
                raise
            image_rc = image.wait()
        print("== the image tests (Podman), the session beside the suite:", flush=True)
        sys.stdout.buffer.write(log.read_bytes())
        sys.stdout.flush()
        image_rc = 0 if image_rc == 5 else image_rc
        return rest or image_rc
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
