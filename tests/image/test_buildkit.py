"""Docker's engine builds through BuildKit (`POST /build?version=2`), the only builder of Docker's that takes the
rendered `RUN --mount`; Podman's service keeps the docker SDK's build. The progress is BuildKit's protobuf trace,
read from streams recorded from a real Docker engine (tests/image/recorded/, each with its source); a client that
records the request stands in for the SDK's here, and tests/image/test_docker_buildkit.py builds on a real one."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from envkit.errors import CannotRun, CheckFailed
from envkit.executor.buildkit import PARTIAL_MAX, Trace, context_tar, dockerignore, fields
from envkit.executor.docker import Engine

RECORDED = Path(__file__).parent / "recorded"
# /version as each engine answered it on this project's machines (Podman 4.3.1's service, Docker 20.10.24), cut to
# the keys the engine reads
PODMAN_VERSION = {
    "Version": "4.3.1",
    "ApiVersion": "1.41",
    "Os": "linux",
    "Arch": "amd64",
    "Components": [{"Name": "Podman Engine", "Version": "4.3.1"}, {"Name": "Conmon", "Version": "conmon version 2.1.6"}],
}
DOCKER_VERSION = {
    "Version": "20.10.24+dfsg1",
    "ApiVersion": "1.41",
    "Os": "linux",
    "Arch": "amd64",
    "Components": [{"Name": "Engine"}, {"Name": "containerd"}, {"Name": "runc"}, {"Name": "docker-init"}],
}


def _recorded(name: str) -> list[dict[str, Any]]:
    return json.loads((RECORDED / f"buildkit-{name}.json").read_text())["chunks"]


class _Response:
    def __init__(self, status: int = 200) -> None:
        self.status = status


class _Api:
    """The docker SDK's APIClient surface a build uses: `build` (Podman) and the request parts of a BuildKit one."""

    def __init__(self, chunks: list[dict[str, Any]], status: int = 200) -> None:
        self.chunks, self.status = chunks, status
        self.built: list[dict[str, Any]] = []
        self.posted: list[dict[str, Any]] = []

    def build(self, **kwargs: Any):
        self.built.append(kwargs)
        return iter(self.chunks)

    def _url(self, path: str) -> str:
        return "http+docker://localhost/v1.41" + path

    def _set_auth_headers(self, headers: dict[str, str]) -> None:
        headers["X-Registry-Config"] = "e30="

    def _post(self, url: str, *, data: Any, **kwargs: Any) -> _Response:
        self.posted.append({"url": url, "body": data.read(), **kwargs})
        return _Response(self.status)

    def _raise_for_status(self, response: _Response) -> None:
        if response.status >= 400:
            raise RuntimeError(f'{response.status} Client Error: Bad Request ("unsupported builder version")')

    def _stream_helper(self, response: _Response, decode: bool = False):
        assert decode
        return iter(self.chunks)


class _Client:
    def __init__(self, version: dict[str, Any], api: _Api) -> None:
        self._version, self.api = version, api

    def version(self) -> dict[str, Any]:
        return self._version


def _engine(version: dict[str, Any], chunks: list[dict[str, Any]], status: int = 200) -> tuple[Engine, _Api]:
    eng = Engine(base_url="unix:///nonexistent.sock")
    eng._client = _Client(version, _Api(chunks, status))
    return eng, eng._client.api


@pytest.fixture
def context(tmp_path: Path) -> Path:
    ctx = tmp_path / "ctx"
    (ctx / "python" / "torch").mkdir(parents=True)
    (ctx / "Dockerfile").write_text((RECORDED / "buildkit-ok.Dockerfile").read_text())
    (ctx / "python" / "torch" / "requirements.txt").write_text((RECORDED / "buildkit-requirements.txt").read_text())
    (ctx / "left-out").mkdir()
    (ctx / "left-out" / "big.bin").write_bytes(b"x" * 10)
    (ctx / ".dockerignore").write_text("# not sent\n\nleft-out\n")
    return ctx


def test_docker_builds_with_buildkit_and_its_trace_becomes_the_log(context: Path) -> None:
    eng, api = _engine(DOCKER_VERSION, _recorded("ok"))
    lines: list[str] = []
    result = eng.build(context, "envkit:t", on_line=lines.append, platform="linux/arm64", buildargs={"A": "1"})
    assert eng.builder() == "buildkit" and api.built == []
    (req,) = api.posted
    assert req["url"].endswith("/build") and req["stream"] is True and req["timeout"] is None
    assert req["params"] == {
        "t": "envkit:t", "rm": True, "forcerm": True, "pull": False, "nocache": False, "buildargs": '{"A": "1"}',
        "version": "2", "platform": "linux/arm64",
    }  # fmt: skip
    assert req["headers"] == {"Content-Type": "application/tar", "X-Registry-Config": "e30="}
    # the context, gzipped (BuildKit reads a plain tar that opens with a PAX header as a Dockerfile), as .dockerignore says
    assert req["body"][:3] == b"\x1f\x8b\x08"
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(req["body"]))) as tar:
        names = tar.getnames()
        assert tar.extractfile("python/torch/requirements.txt").read() == (RECORDED / "buildkit-requirements.txt").read_bytes()
    assert names == sorted(names) and "Dockerfile" in names and not any(n.startswith("left-out") for n in names)
    # the steps once each, their output (a line split across two trace messages joined), the image id
    assert lines[:4] == [
        "[internal] load remote build context",
        "copy /context /",
        "[internal] load metadata for localhost/envkit-base:bookworm",
        "CACHED [os 1/1] FROM localhost/envkit-base:bookworm",
    ]
    assert lines[4].startswith("[torch 1/1] RUN --mount=type=bind,source=python/torch,target=/tmp/envkit-python/torch")
    assert lines[5:] == [
        "/tmp/envkit-python/torch/requirements.txt: OK",
        "one line",
        "half a line",
        "[runtime 1/1] RUN cat /built",
        "built",
        "exporting to image",
        "Successfully tagged envkit-rec:ok",
    ]
    assert result.image_id == next(c["aux"]["ID"] for c in _recorded("ok") if c.get("id") == "moby.image.id")
    assert result.log == lines


def test_a_failed_buildkit_step_fails_the_build_with_its_output(context: Path) -> None:
    eng, _ = _engine(DOCKER_VERSION, _recorded("fail"))
    with pytest.raises(CheckFailed) as exc:
        eng.build(context, "envkit:t")
    assert "the image build failed: executor failed running" in str(exc.value) and "exit code: 1" in str(exc.value)
    tail = exc.value.details["log_tail"]
    assert "/tmp/envkit-python/torch/requirements.txt: FAILED" in tail
    assert tail[-1].startswith("ERROR [torch 1/1]: executor failed running")
    assert exc.value.hint == "The build log above shows the failing step."


def test_an_engine_that_refuses_the_buildkit_request_cannot_run(context: Path) -> None:
    eng, _ = _engine(DOCKER_VERSION, [], status=400)
    with pytest.raises(CannotRun) as exc:
        eng.build(context, "envkit:t")
    assert "refused the BuildKit build" in str(exc.value) and "unsupported builder version" in str(exc.value)


@pytest.mark.parametrize(
    "version",
    [PODMAN_VERSION, {**DOCKER_VERSION, "Components": [*DOCKER_VERSION["Components"], {"Name": "Podman Engine"}]},
     {**DOCKER_VERSION, "Components": None}, {**DOCKER_VERSION, "Components": ["Engine"]}],
    ids=["podman", "podman-naming-engine-too", "no-components", "components-not-mappings"],
)  # fmt: skip
def test_podman_and_an_engine_that_does_not_name_itself_keep_the_sdk_build(context: Path, version: dict) -> None:
    chunks = [{"stream": "STEP 1/1: FROM x\n"}, {"stream": "a" * 64 + "\n"}]
    eng, api = _engine(version, chunks)
    result = eng.build(context, "envkit:t")
    assert eng.builder() == "api" and api.posted == [] and api.built[0]["path"] == str(context)
    assert result.image_id == "sha256:" + "a" * 64


def test_the_context_tar_is_the_same_bytes_for_the_same_files(context: Path, tmp_path: Path) -> None:
    with context_tar(context, dockerignore(context)) as one, context_tar(context, dockerignore(context)) as two:
        assert one.read() == two.read()
    assert dockerignore(context) == ["left-out"] and dockerignore(tmp_path) == []


def _varint(n: int) -> bytes:
    out = b""
    while n >= 0x80:
        out += bytes([n & 0x7F | 0x80])
        n >>= 7
    return out + bytes([n])


def _message(*parts: tuple[int, bytes]) -> bytes:
    """A protobuf message of length-delimited fields."""
    return b"".join(bytes([number << 3 | 2]) + _varint(len(value)) + value for number, value in parts)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(
    "aux",
    [None, 7, {"ID": "x"}, "not base64!", _b64(b"\x0a\x7f"),  # a length past the end
     _b64(b"\x0b"),  # wire type 3 (a group)
     _b64(b"\x08" + b"\xff" * 11),  # a varint past 64 bits
     _b64(_message((1, b"\x0b")) + _message((3, _message((1, b"d"), (4, b"x\n"))))),  # a vertex with a group inside
     _b64(_message((3, b"\x22\x09ab"))),  # a log whose msg runs past its end
     ],
    ids=["none", "int", "mapping", "not-base64", "truncated", "group", "long-varint", "nested-group", "nested-truncated"],
)  # fmt: skip
def test_a_trace_message_that_does_not_decode_gives_no_lines(aux: object) -> None:
    assert Trace().lines(aux) == []


def test_trace_lines_from_hand_made_messages() -> None:
    t = Trace()
    vertex = _message((1, b"sha256:a"), (3, b"[1/1] RUN x"))
    assert t.lines(_b64(_message((1, vertex)))) == []  # named, not started
    started = _b64(_message((1, vertex + b"\x2a\x00")))  # field 5 (started), an empty Timestamp
    assert t.lines(started) == ["[1/1] RUN x"] and t.lines(started) == []  # once
    log = _b64(_message((3, _message((1, b"sha256:a"), (4, b"ab\r\ncd")))))
    assert t.lines(log) == ["ab"]
    done = _b64(_message((1, _message((1, b"sha256:a"), (6, b"")))))  # completed (field 6), not named again
    assert t.lines(done) == ["cd"]  # the rest of a step's output when it completes
    failed = _b64(_message((1, _message((1, b"sha256:a"), (7, b"exit code: 2")))))
    assert t.lines(failed) == ["ERROR [1/1]: exit code: 2"] and t.lines(failed) == []
    cached = _b64(_message((1, _message((1, b"sha256:b"), (3, b"[2/2] COPY y")) + b"\x20\x01")))  # cached (4) = true
    assert t.lines(cached) == ["CACHED [2/2] COPY y"]
    assert list(fields(b"\x08\x96\x01")) == [(1, 150)]


@pytest.mark.parametrize(("size", "shown"), [(PARTIAL_MAX, False), (PARTIAL_MAX + 1, True)])
def test_output_without_a_newline_is_held_up_to_its_bound(size: int, shown: bool) -> None:
    t = Trace()
    assert t.lines(_b64(_message((3, _message((1, b"sha256:a"), (4, b"x" * size)))))) == (["x" * size] if shown else [])
    then = t.lines(_b64(_message((3, _message((1, b"sha256:a"), (4, b"y\n"))))))
    assert then == (["y"] if shown else ["x" * size + "y"])


def test_an_engine_that_sends_no_components_is_announced_and_asked_once(context: Path) -> None:
    eng, api = _engine({**DOCKER_VERSION, "Components": None}, [{"stream": "a" * 64 + "\n"}])
    calls = []
    version = eng._client.version
    eng._client.version = lambda: calls.append(1) or version()
    said: list[str] = []
    assert eng.announce("linux/amd64", said.append) is False
    assert said == [f"engine 20.10.24+dfsg1 (API 1.41) on linux/amd64 at {eng.base_url}"]
    assert eng.version()["components"] == {} and eng.builder() == "api"
    eng.build(context, "envkit:t")
    assert len(calls) == 1
