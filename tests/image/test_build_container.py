"""`envkit lock --build-image`: the sdist build's place in a container (`envkit.executor.docker.BuildContainer`), with
an engine that records what it is asked (the real build under emulation: test_podman_emulated.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from envkit.artifacts.closure import make_target
from envkit.errors import BadInput, CannotRun
from envkit.executor.docker import BuildContainer

IMAGE = "localhost/envkit-base:bookworm-arm64"


class _Engine:
    """Answers each run with the next (exit code, output) and keeps what it was asked."""

    base_url = "unix:///run/test.sock"

    def __init__(self, *answers: tuple[int, str] | Exception) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []

    def run(self, image: str, command: list[str], **kw: Any) -> tuple[int, str]:
        self.calls.append({"image": image, "command": command, **kw})
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _place(engine: _Engine, tmp_path: Path) -> BuildContainer:
    return BuildContainer(engine, IMAGE, "linux/arm64", tmp_path)  # type: ignore[arg-type]


def test_each_step_runs_in_a_fresh_container_with_the_folder_and_the_ca_bundle_alone(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    engine = _Engine((0, "done\n"))
    place = _place(engine, tmp_path / "work")
    assert place.root == PurePosixPath("/build") and place.python == "python3"
    env = {"PATH": "/build/venv/bin:/usr/bin:/bin", "SSL_CERT_FILE": str(ca), "PIP_CERT": str(ca), "HOME": "/build/home"}
    place.run(["python3", "-I", "-m", "venv", "/build/venv"], env, "creating the build venv")
    (call,) = engine.calls
    assert call["image"] == IMAGE and call["command"] == ["python3", "-I", "-m", "venv", "/build/venv"]
    assert call["platform"] == "linux/arm64" and call["network_mode"] == "host" and call["working_dir"] == "/build"
    assert call["user"] == f"{os.getuid()}:{os.getgid()}"
    # one mount of the CA bundle however many variables name it, read-only; the variables point inside
    assert call["volumes"] == {
        str(tmp_path / "work"): {"bind": "/build", "mode": "rw"},
        str(ca.resolve()): {"bind": "/etc/envkit-build/ca-1.pem", "mode": "ro"},
    }
    assert call["env"] == {**env, "SSL_CERT_FILE": "/etc/envkit-build/ca-1.pem", "PIP_CERT": "/etc/envkit-build/ca-1.pem"}
    assert env["PIP_CERT"] == str(ca)  # the caller's mapping is left as it was


def test_a_failed_step_names_the_step_the_image_and_the_log(tmp_path: Path) -> None:
    place = _place(_Engine((1, "ERROR: No matching distribution found for torch==2.10.0\n")), tmp_path)
    with pytest.raises(CannotRun) as info:
        place.run(["python3", "-m", "pip"], {}, "installing torch==2.10.0 for the build")
    assert info.value.message == f"installing torch==2.10.0 for the build failed in {IMAGE} (exit 1)"
    assert "No matching distribution found for torch==2.10.0" in (info.value.hint or "")


def test_an_engine_that_cannot_run_the_image_is_cannot_run(tmp_path: Path) -> None:
    place = _place(_Engine(RuntimeError("404 Client Error: no such image: localhost/envkit-base:bookworm-arm64")), tmp_path)
    with pytest.raises(CannotRun) as info:
        place.run(["true"], {}, "creating the build venv")
    assert info.value.message.startswith(f"cannot run {IMAGE} (linux/arm64) at unix:///run/test.sock: 404 Client Error")
    assert "pull or load the build image" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("answer", "python", "arch", "refused"),
    [
        ((0, "envkit-build 3.11 aarch64\n"), "3.11", "aarch64", None),
        ((0, "WARNING: image platform\nenvkit-build 3.11 arm64\n"), "3.11", "aarch64", None),  # arm64 is aarch64
        ((0, "envkit-build 3.11 aarch64\n"), "3.10", "aarch64", "whose python3 is Python 3.11 on aarch64"),
        ((0, "envkit-build 3.11 x86_64\n"), "3.11", "aarch64", "whose python3 is Python 3.11 on x86_64"),
        ((127, "exec: python3: not found\n"), "3.11", "aarch64", "its python3 did not start (exit 127)"),
        ((0, "Python 3.11\n"), "3.11", "aarch64", "its python3 did not start (exit 0)"),
    ],
)
def test_the_images_python_must_be_the_targets(tmp_path: Path, answer, python, arch, refused) -> None:
    engine = _Engine(answer)
    place = _place(engine, tmp_path)
    target = make_target(python, arch)
    if refused is None:
        place.check_target("vllm", target)
    else:
        with pytest.raises(CannotRun, match=re.escape(refused)) as info:
            place.check_target("vllm", target)
        assert f"Python {python}" in (info.value.hint or "")
    assert engine.calls[0]["command"][:3] == ["python3", "-I", "-c"]


def test_the_build_image_is_an_image_reference(run_cli, tmp_path: Path) -> None:
    """`envkit lock --build-image` takes an image reference only, refused before the lock is read."""
    r = run_cli("lock", "--lock", str(tmp_path / "absent.lock"), "--build-image", "img; rm -rf /")
    assert r.code == 2 and "--build-image 'img; rm -rf /' is not an image reference" in " ".join(r.err.split()), r.err
    from envkit.io.bounded import image_ref

    assert image_ref("registry.example:5000/team/cann@sha256:" + "a" * 64, "--build-image").endswith("a" * 64)
    for bad in ("", "-x", "a" * 513, "a b", "a\nb", "$(x)"):
        with pytest.raises(BadInput):
            image_ref(bad, "--build-image")
    assert image_ref("a" * 512, "--build-image") == "a" * 512  # the cap's top is taken
