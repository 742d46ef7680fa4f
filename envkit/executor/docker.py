"""The one executor of container side effects: a thin layer over the docker SDK.

It talks to whatever answers the Docker API at DOCKER_HOST: Docker, or Podman's Docker-compatible
service (`podman system service unix://...`). `docker` is imported on first use only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.errors import CannotRun, CheckFailed

_STEP = re.compile(r"^(STEP \d+/\d+|Step \d+/\d+)")


@dataclass(frozen=True)
class BuildResult:
    image_id: str
    tag: str | None
    log: list[str]


class Engine:
    def __init__(self, base_url: str | None = None, timeout: int = 1800) -> None:
        self.base_url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        self.timeout = timeout
        self._client: Any = None

    # --- connection --------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import docker
            except ImportError:  # pragma: no cover - a dependency of envkit
                raise CannotRun("the docker SDK is not installed", hint="pip install docker") from None
            try:
                self._client = docker.DockerClient(base_url=self.base_url, timeout=self.timeout)
                self._client.ping()
            except Exception as exc:  # noqa: BLE001 - every connection failure means the same to the user
                self._client = None
                raise CannotRun(
                    f"no container engine answers at {self.base_url}: {_short(exc)}",
                    hint=(
                        "Start Docker, or Podman's Docker-compatible service:\n"
                        "  podman system service --time=0 unix:///run/podman/podman.sock &\n"
                        "  export DOCKER_HOST=unix:///run/podman/podman.sock"
                    ),
                ) from None
        return self._client

    def version(self) -> dict[str, Any]:
        v = self.client.version()
        components = {c.get("Name"): c.get("Version") for c in v.get("Components", [])}
        return {"version": v.get("Version"), "api": v.get("ApiVersion"), "components": components, "url": self.base_url}

    # --- build -------------------------------------------------------------------------------
    def build(
        self,
        context: Path,
        tag: str | None,
        *,
        on_line: Callable[[str], None] | None = None,
        buildargs: dict[str, str] | None = None,
        pull: bool = False,
        nocache: bool = False,
    ) -> BuildResult:
        """Build `context` (holding a Dockerfile), streaming each output line to `on_line`."""
        log: list[str] = []
        image_id = None
        stream = self.client.api.build(
            path=str(context), tag=tag, rm=True, forcerm=True, pull=pull, nocache=nocache, decode=True, buildargs=buildargs or {}
        )
        for chunk in _chunks(stream):
            if "error" in chunk or "errorDetail" in chunk:
                msg = chunk.get("error") or chunk.get("errorDetail", {}).get("message", "")
                raise CheckFailed(
                    f"the image build failed: {msg.strip()}",
                    hint="The build log above shows the failing step.",
                    details={"log_tail": log[-30:]},
                )
            text = chunk.get("stream")
            if text:
                for line in text.splitlines():
                    log.append(line)
                    if on_line:
                        on_line(line)
            aux = chunk.get("aux")
            if isinstance(aux, dict) and aux.get("ID"):
                image_id = aux["ID"]
        if image_id is None:  # podman reports the id as the last stream line
            for line in reversed(log):
                m = re.fullmatch(r"(?:sha256:)?([0-9a-f]{64})", line.strip())
                if m:
                    image_id = "sha256:" + m[1]
                    break
        if image_id is None and tag:
            image_id = self.client.images.get(tag).id
        if image_id is None:
            raise CheckFailed("the engine finished the build without reporting an image id", details={"log_tail": log[-30:]})
        return BuildResult(image_id=image_id, tag=tag, log=log)

    # --- images and containers ---------------------------------------------------------------
    def inspect(self, ref: str) -> dict[str, Any]:
        return self.client.api.inspect_image(ref)

    def history(self, ref: str) -> list[dict[str, Any]]:
        return self.client.api.history(ref)

    def run(
        self, image: str, command: list[str], *, env: dict[str, str] | None = None, user: str | None = None, **kwargs: Any
    ) -> tuple[int, str]:
        """Run a command in a fresh container, wait, remove it; return (exit code, combined output)."""
        c = self.client.containers.create(image, command, environment=env or {}, user=user, **kwargs)
        try:
            c.start()
            rc = c.wait(timeout=self.timeout).get("StatusCode", -1)
            out = c.logs(stdout=True, stderr=True).decode(errors="replace")
        finally:
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001 - best-effort cleanup
                pass
        return rc, out

    def save(self, ref: str, dest: Path, on_bytes: Callable[[int], None] | None = None) -> str:
        """`docker save REF` into `dest` (a docker-archive tar), atomically; returns its sha256."""
        import hashlib

        tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
        h = hashlib.sha256()
        try:
            with open(tmp, "wb") as fh:
                for chunk in self.client.api.get_image(ref):
                    fh.write(chunk)
                    h.update(chunk)
                    if on_bytes is not None:
                        on_bytes(len(chunk))
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o444)  # read-only: bundles may hard-link it
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return h.hexdigest()

    def remove_image(self, ref: str) -> None:
        try:
            self.client.images.remove(ref, force=True)
        except Exception:  # noqa: BLE001 - absent is fine
            pass


def _chunks(stream: Iterator[Any]) -> Iterator[dict[str, Any]]:
    for chunk in stream:
        if isinstance(chunk, dict):
            yield chunk


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


def is_step(line: str) -> bool:
    return bool(_STEP.match(line))
