"""On a real Docker engine (tests/integration/setup/docker.sh: Debian's docker.io, its own dockerd), envkit builds
through BuildKit: the rendered `RUN --mount=type=bind` with the requirements' sha256 check works, the step's output
streams, the bind-mounted files never become part of the image, and a failed check fails the build with its output.

    eval "$(tests/integration/setup/podman.sh)"; eval "$(tests/integration/setup/docker.sh)"
    pytest tests/image/test_docker_buildkit.py -m docker
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from envkit.errors import CheckFailed
from envkit.executor.docker import Engine

pytestmark = [pytest.mark.docker, pytest.mark.root, pytest.mark.slow]

RECORDED = Path(__file__).parent / "recorded"
HOST, BASE = os.environ.get("ENVKIT_TEST_DOCKER_HOST"), os.environ.get("ENVKIT_TEST_DOCKER_BASE")
if not HOST or not BASE:
    pytest.skip('ENVKIT_TEST_DOCKER_HOST/_BASE not set: eval "$(tests/integration/setup/docker.sh)"', allow_module_level=True)


@pytest.fixture(scope="module")
def engine():
    eng = Engine(base_url=HOST, timeout=600)
    made: list[str] = []
    yield eng, made
    for ref in made:
        eng.remove_image(ref)


def _context(tmp_path: Path, dockerfile: str) -> Path:
    ctx = tmp_path / "ctx"
    (ctx / "python" / "torch").mkdir(parents=True)
    shutil.copy(RECORDED / "buildkit-requirements.txt", ctx / "python" / "torch" / "requirements.txt")
    (ctx / "Dockerfile").write_text((RECORDED / dockerfile).read_text().replace("localhost/envkit-base:bookworm", BASE))
    return ctx


def test_docker_builds_the_bind_mount_through_buildkit(engine, tmp_path: Path) -> None:
    eng, made = engine
    assert eng.builder() == "buildkit"
    tag = f"localhost/envkit-test-buildkit:{os.getpid()}"
    made.append(tag)
    lines: list[str] = []
    result = eng.build(_context(tmp_path, "buildkit-ok.Dockerfile"), tag, on_line=lines.append, nocache=True)
    assert "/tmp/envkit-python/torch/requirements.txt: OK" in lines and "half a line" in lines and "built" in lines
    assert result.image_id == eng.inspect(tag)["Id"]
    # the bind mount left no file (BuildKit keeps the empty folder it mounted on)
    rc, out = eng.run(tag, ["bash", "-c", "cat /built; find /tmp/envkit-python -type f"])
    assert (rc, out) == (0, "built\n")


def test_a_failed_check_in_a_buildkit_step_fails_the_build(engine, tmp_path: Path) -> None:
    eng, made = engine
    tag = f"localhost/envkit-test-buildkit-fail:{os.getpid()}"
    made.append(tag)
    with pytest.raises(CheckFailed) as exc:
        eng.build(_context(tmp_path, "buildkit-fail.Dockerfile"), tag, nocache=True)
    assert "exit code: 1" in str(exc.value)
    assert "/tmp/envkit-python/torch/requirements.txt: FAILED" in exc.value.details["log_tail"]
