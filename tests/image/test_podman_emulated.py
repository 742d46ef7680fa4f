"""The default (aarch64) lock's image, built on this x86_64 machine through Podman's Docker API under user-mode
emulation: the build is for the lock's platform, not the builder's.

Needs root, the engine and the arm64 base from tests/integration/setup/podman.sh (DOCKER_HOST,
ENVKIT_TEST_BASE_ARM64: Debian bookworm's arm64 packages unpacked by mmdebstrap, since no registry is reachable),
and qemu-user-static registered with binfmt_misc (the same script does it).

The wheel set is small on purpose (every RUN step is emulated): numpy (a native aarch64 wheel) and envkit with its
own dependencies (pydantic-core and PyYAML are native too), all real PyPI wheels for manylinux aarch64; the lock's
torch, torch_npu, Transformers and Accelerate pins and CANN's Python dependencies are left out of this test's
edited lock. The CANN packages are the fixture installers, run by the emulated bash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import fixture_installers, resolve_lock, wheelhouse

pytestmark = [pytest.mark.podman, pytest.mark.root, pytest.mark.slow]

WORK = Path(os.environ.get("ENVKIT_PODMAN_WORK", "/var/tmp/envkit-podman"))
AARCH64 = ["--platform", "manylinux_2_28_aarch64", "--platform", "manylinux2014_aarch64", "--platform", "manylinux_2_17_aarch64"]
TAG = "localhost/envkit-test:aarch64"


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if not os.environ.get("DOCKER_HOST") or not os.environ.get("ENVKIT_TEST_BASE_ARM64"):
        return 'DOCKER_HOST/ENVKIT_TEST_BASE_ARM64 not set: eval "$(tests/integration/setup/podman.sh)"'
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").is_file():
        return "qemu-aarch64 is not registered with binfmt_misc (tests/integration/setup/podman.sh does it)"
    return None


if _skip_reason():
    pytest.skip(_skip_reason(), allow_module_level=True)


@pytest.fixture(scope="module")
def aarch64_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The default lock for Python 3.11 (the arm64 base's python3), its pins cut to numpy; the fixture
    CANN packages; a wheelhouse of real aarch64 wheels (cached across sessions, envkit's own wheel rebuilt)."""
    d = tmp_path_factory.mktemp("aarch64")
    lock_path = resolve_lock(["--python", "3.11"], d / "resolved.lock")
    lock = yaml.safe_load(lock_path.read_text())
    assert lock["stack"]["arch"] == "aarch64"  # the default target
    numpy = lock["stack"]["numpy"]
    picked = wheelhouse(WORK / "wheelhouse-py311-aarch64", [f"numpy=={numpy}"], AARCH64)
    # envkit is no pin: the image takes envkit's own wheel (the wheelhouse's gives way); its dependencies are wheels here
    lock["python"]["requirements"] = [{"name": "numpy", "version": numpy, "index": None}]
    lock["python"]["cann_runtime"] = []
    edited = d / "envkit.lock"
    edited.write_text(yaml.safe_dump(lock, sort_keys=False))
    arts = fixture_installers(edited, d / "artifacts")
    (arts / "wheels").mkdir()
    for w in picked:
        (arts / "wheels" / w.name).symlink_to(w)
    return edited, arts


def test_the_aarch64_lock_builds_an_aarch64_image(aarch64_inputs) -> None:
    from envkit.executor.docker import Engine

    lock, arts = aarch64_inputs
    context = lock.parent / "context"
    r = subprocess.run(
        [
            sys.executable, "-m", "envkit", "--accept-edited-lock", "image", "build", "--lock", str(lock),
            "--artifacts", str(arts), "--base", os.environ["ENVKIT_TEST_BASE_ARM64"], "--tag", TAG,
            "--context", str(context), "--json",
        ],
        capture_output=True, text=True, timeout=3000,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    summary = json.loads(r.stdout)
    assert summary["platform"] == "linux/arm64" and summary["emulated"] is True
    assert "user-mode emulation" in r.stderr  # the user is told the build is emulated
    assert "FROM --platform=linux/arm64 " in (context / "Dockerfile").read_text()
    eng = Engine()
    try:
        info = eng.inspect(TAG)
        assert info["Architecture"] == "arm64" and info["Os"] == "linux"
        rc, out = eng.run(TAG, ["bash", "-c", "uname -m; python3 -c 'import platform; print(platform.machine())'"])
        assert rc == 0 and out.split() == ["aarch64", "aarch64"], out
        # the venv's native aarch64 wheels load and compute
        rc, out = eng.run(TAG, ["python", "-c", "import numpy, pydantic_core, yaml; print(int(numpy.arange(5).sum()))"])
        assert rc == 0 and out.strip().splitlines()[-1] == "10", out
        rc, out = eng.run(TAG, ["bash", "-c", "envkit doctor --json 2>/dev/null"])
        assert rc in (0, 1), out[-3000:]
        report = json.loads(out)
        assert report["observed"]["arch"]["value"] == "aarch64"
        assert next(c for c in report["checks"] if c["name"] == "arch")["detail"].startswith("aarch64")
    finally:
        eng.remove_image(TAG)
