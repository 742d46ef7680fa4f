"""The engine builds for the lock's platform: the Docker API's build gets it, the user hears when the engine emulates
it, and an emulator that is missing is named (no engine here: a recording client stands in for the SDK's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envkit.errors import CheckFailed
from envkit.executor.docker import Engine, emulation_note


class _Api:
    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self.chunks = chunks
        self.calls: list[dict[str, Any]] = []

    def build(self, **kwargs: Any):
        self.calls.append(kwargs)
        return iter(self.chunks)


class _Client:
    """The docker SDK client's surface the engine uses; `version()` as Podman's compat API answers it."""

    def __init__(self, chunks: list[dict[str, Any]], arch: str = "amd64") -> None:
        self.api = _Api(chunks)
        self.arch = arch

    def version(self) -> dict[str, Any]:
        return {"Version": "4.3.1", "ApiVersion": "1.41", "Os": "linux", "Arch": self.arch, "Components": []}


def _engine(chunks: list[dict[str, Any]], arch: str = "amd64") -> tuple[Engine, _Client]:
    eng = Engine(base_url="unix:///nonexistent.sock")
    eng._client = _Client(chunks, arch)
    return eng, eng._client


def test_build_passes_the_platform(tmp_path: Path) -> None:
    eng, client = _engine([{"stream": "STEP 1/2: FROM x\n"}, {"aux": {"ID": "sha256:" + "a" * 64}}])
    result = eng.build(tmp_path, "t:1", platform="linux/arm64")
    assert result.image_id == "sha256:" + "a" * 64
    assert client.api.calls[0]["platform"] == "linux/arm64" and client.api.calls[0]["tag"] == "t:1"
    eng.build(tmp_path, "t:2")
    assert client.api.calls[1]["platform"] is None  # no platform: the engine's own


def test_the_engine_platform_and_the_emulation_note() -> None:
    eng, _ = _engine([])
    assert eng.version()["platform"] == "linux/amd64" and eng.platform() == "linux/amd64"
    said: list[str] = []
    assert eng.announce("linux/arm64", said.append) is True
    assert "on linux/amd64" in said[0] and "emulation" in said[1] and "linux/arm64" in said[1]
    said.clear()
    assert eng.announce("linux/amd64", said.append) is False and len(said) == 1
    assert emulation_note("linux/arm64", None) is None  # an engine that reports no platform: nothing claimed
    assert emulation_note("linux/arm64", "linux/arm64") is None


@pytest.mark.parametrize(
    ("engine_arch", "message", "names_qemu"),
    [
        ("amd64", 'building at STEP "RUN python3 -c ...": exec format error', True),  # no binfmt emulator
        ("arm64", 'building at STEP "RUN python3 -c ...": exec format error', False),  # native: not an emulation gap
        ("amd64", 'building at STEP "RUN false": exit status 1', False),  # any other failure
    ],
)
def test_a_missing_emulator_is_named(tmp_path: Path, engine_arch: str, message: str, names_qemu: bool) -> None:
    eng, _ = _engine([{"stream": "STEP 2/9: RUN python3 -c ...\n"}, {"error": message}], engine_arch)
    with pytest.raises(CheckFailed) as exc:
        eng.build(tmp_path, "t:1", platform="linux/arm64")
    assert ("qemu-user-static" in (exc.value.hint or "")) is names_qemu
    assert exc.value.details["log_tail"] == ["STEP 2/9: RUN python3 -c ..."]


def test_exec_format_error_in_the_log_counts(tmp_path: Path) -> None:
    """Podman reports the step's exit in `error` and the loader's complaint in the log before it."""
    chunks = [{"stream": "/bin/sh: 1: /usr/bin/python3: exec format error\n"}, {"error": "exit status 126"}]
    eng, _ = _engine(chunks)
    with pytest.raises(CheckFailed) as exc:
        eng.build(tmp_path, "t:1", platform="linux/arm64")
    assert "linux/arm64" in exc.value.hint and "linux/amd64" in exc.value.hint


def test_the_classic_builder_refusing_run_mount_is_explained(tmp_path: Path) -> None:
    """Docker's API builds with its classic builder when the client does not ask for BuildKit (the docker SDK
    cannot): the rendered `RUN --mount` is refused, and the hint says how to build the context instead."""
    msg = "the --mount option requires BuildKit. Refer to https://docs.docker.com/go/buildkit/ to learn how to build"
    eng, _ = _engine([{"stream": "Step 9/30 : RUN --mount=type=bind,source=python/torch,target=/tmp/x true\n"}, {"error": msg}])
    with pytest.raises(CheckFailed) as exc:
        eng.build(tmp_path, "t:1")
    assert "docker build" in exc.value.hint and "Podman" in exc.value.hint and "qemu" not in exc.value.hint
