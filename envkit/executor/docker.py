"""The one executor of container side effects: a thin layer over the docker SDK.

It talks to whatever answers the Docker API at DOCKER_HOST: Docker, or Podman's Docker-compatible
service (`podman system service unix://...`). `docker` is imported on first use only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from envkit.errors import CannotRun, CheckFailed
from envkit.executor.buildkit import TRACE_ID, Trace, context_tar, dockerignore


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
        self._answer: dict[str, Any] | None = None  # /version, asked once per engine

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

    def _version_answer(self) -> dict[str, Any]:
        """The engine's /version answer, asked once (announce, the builder's choice and a failed build's hint read it)."""
        if self._answer is None:
            answer = self.client.version()
            self._answer = answer if isinstance(answer, dict) else {}
        return self._answer

    def _components(self) -> list[dict[str, Any]]:
        """/version's components that are mappings (an engine may send none, or null)."""
        return [c for c in self._version_answer().get("Components") or [] if isinstance(c, dict)]

    def version(self) -> dict[str, Any]:
        v = self._version_answer()
        components = {c.get("Name"): c.get("Version") for c in self._components()}
        return {
            "version": v.get("Version"),
            "api": v.get("ApiVersion"),
            "components": components,
            "url": self.base_url,
            "platform": _platform(v),
        }

    def announce(self, want: str, say: Callable[[str], None]) -> bool:
        """Say which engine builds, and whether it emulates `want` (another platform than its own); True if so."""
        info = self.version()
        say(f"engine {info['version']} (API {info['api']}) on {info['platform'] or 'an unreported platform'} at {info['url']}")
        note = emulation_note(want, info["platform"])
        if note:
            say(note)
        return note is not None

    def platform(self) -> str | None:
        """The engine's own platform (`linux/amd64`), as its version endpoint reports it; None: not reported."""
        try:
            return _platform(self._version_answer())
        except Exception:  # noqa: BLE001 - only a hint depends on it
            return None

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
        platform: str | None = None,
    ) -> BuildResult:
        """Build `context` (holding a Dockerfile) for `platform` (`linux/arm64`; None: the engine's own), streaming
        each output line to `on_line`."""
        log: list[str] = []
        image_id = None
        trace = Trace()
        if self.builder() == "buildkit":
            stream = self._build_buildkit(context, tag, pull=pull, nocache=nocache, buildargs=buildargs, platform=platform)
        else:
            stream = self.client.api.build(
                path=str(context),
                tag=tag,
                rm=True,
                forcerm=True,
                pull=pull,
                nocache=nocache,
                decode=True,
                buildargs=buildargs or {},
                platform=platform,
            )
        for chunk in _chunks(stream):
            # BuildKit's progress (Docker), or the classic builders' and Buildah's text lines
            lines = trace.lines(chunk.get("aux")) if chunk.get("id") == TRACE_ID else str(chunk.get("stream") or "").splitlines()
            for line in lines:
                log.append(line)
                if on_line:
                    on_line(line)
            if "error" in chunk or "errorDetail" in chunk:
                msg = chunk.get("error") or chunk.get("errorDetail", {}).get("message", "")
                raise CheckFailed(
                    f"the image build failed: {msg.strip()}",
                    hint=_build_hint(msg, log, platform, self.platform()),
                    details={"log_tail": log[-30:]},
                )
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

    def builder(self) -> str:
        """`buildkit` for Docker's engine (its API builds `RUN --mount` only when asked for BuildKit); `api` for
        Podman's service (Buildah) and any engine that does not name itself, which the docker SDK's build drives."""
        try:
            names = {c.get("Name") for c in self._components()}
        except Exception:  # noqa: BLE001 - the build itself reports an engine that does not answer
            return "api"
        return "buildkit" if "Engine" in names and "Podman Engine" not in names else "api"

    def _build_buildkit(
        self,
        context: Path,
        tag: str | None,
        *,
        pull: bool,
        nocache: bool,
        buildargs: dict[str, str] | None,
        platform: str | None,
    ) -> Iterator[Any]:
        """`POST /build?version=2`: what the docker SDK's build sends, plus BuildKit and a gzipped context."""
        import json

        api = self.client.api
        params: dict[str, Any] = {
            "t": tag,
            "rm": True,
            "forcerm": True,
            "pull": pull,
            "nocache": nocache,
            "buildargs": json.dumps(buildargs or {}),
            "version": "2",
        }
        if platform:
            params["platform"] = platform
        headers = {"Content-Type": "application/tar"}
        api._set_auth_headers(headers)  # the registry credentials of ~/.docker/config.json, as the SDK's build
        with context_tar(context, dockerignore(context)) as body:
            response = api._post(api._url("/build"), data=body, params=params, headers=headers, stream=True, timeout=None)
        try:
            api._raise_for_status(response)
        except Exception as exc:  # noqa: BLE001 - the engine refused the request itself
            raise CannotRun(f"the engine at {self.base_url} refused the BuildKit build: {_short(exc)}") from None
        return api._stream_helper(response, decode=True)

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


def _platform(version: dict[str, Any]) -> str | None:
    os_name, arch = version.get("Os"), version.get("Arch")
    return f"{os_name}/{arch}" if isinstance(os_name, str) and isinstance(arch, str) and os_name and arch else None


def emulation_note(want: str, engine: str | None) -> str | None:
    """What the user should know when the engine builds for another platform than its own (None: the same)."""
    if engine is None or engine == want:
        return None
    return (
        f"building for {want} on a {engine} engine: every RUN step runs under user-mode emulation "
        "(qemu-user-static registered with binfmt_misc), several times slower than a native build"
    )


def _build_hint(msg: str, log: list[str], want: str | None, engine: str | None) -> str:
    text = "\n".join([msg, *log[-30:]]).lower()
    if want and engine and want != engine and "exec format error" in text:
        return (
            f"The image is for {want} and the engine runs on {engine}, and no emulator ran the {want} binaries. "
            "Register user-mode emulation on the engine's host (Debian/Ubuntu: apt-get install qemu-user-static; "
            "check /proc/sys/fs/binfmt_misc/qemu-aarch64), or build on a host of that platform."
        )
    if "requires buildkit" in text:  # a classic builder: an engine that did not name itself Docker's `Engine`
        return (
            "The Dockerfile installs Python through `RUN --mount=type=bind` (the wheels never become a layer), which "
            "Docker builds with BuildKit only. envkit asks Docker's engine for BuildKit (`/build?version=2`), but "
            "this engine's /version names no `Engine` component, so it was driven like any other (the classic "
            "builder). Build the rendered context with `docker build` (BuildKit is its default since Docker 23): "
            "`envkit image render ... -o DIR && docker build -t TAG DIR`; or point DOCKER_HOST at Podman's service "
            "(Podman 4 / Buildah >= 1.24)."
        )
    return "The build log above shows the failing step."


def _chunks(stream: Iterator[Any]) -> Iterator[dict[str, Any]]:
    for chunk in stream:
        if isinstance(chunk, dict):
            yield chunk


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


# the machine's CA bundles a build's pip is told of (`envkit.artifacts.sdist._clean_env`): mounted read-only
_CA_KEYS = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT")
_BUILD_ROOT = PurePosixPath("/build")


@dataclass
class BuildContainer:
    """Where `envkit lock --build-image IMAGE` builds an sdist (`envkit.artifacts.sdist.BuildPlace`): each step in a
    fresh container of `image` on `platform` (`linux/arm64`: emulated by the engine where its own arch differs),
    the build folder `work` mounted at /build and nothing else of this machine's but the CA bundle its pip trusts
    (read-only); as this machine's user; on its network, so that the lock's indexes are reached as here."""

    engine: Engine
    image: str
    platform: str
    work: Path

    root = _BUILD_ROOT
    python = "python3"

    def check_target(self, name: str, target: Any) -> None:
        probe = "import platform, sys; print('envkit-build', '%d.%d' % sys.version_info[:2], platform.machine())"
        rc, out = self._run([self.python, "-I", "-c", probe], {})
        seen = next((ln.split()[1:] for ln in reversed(out.splitlines()) if ln.startswith("envkit-build ")), None)
        if rc != 0 or seen is None or len(seen) != 2:
            raise CannotRun(
                f"{self.image} ({self.platform}) cannot build {name}: its python3 did not start (exit {rc})",
                hint=(out.strip()[-1500:] + "\n" if out.strip() else "")
                + f"The image needs Python {target.python} as python3, with venv and pip.",
            )
        arch = {"arm64": "aarch64", "amd64": "x86_64"}.get(seen[1], seen[1])
        if (seen[0], arch) != (target.python, target.arch):
            raise CannotRun(
                f"{name} would be built in {self.image}, whose python3 is Python {seen[0]} on {arch}, and the lock's "
                f"target is Python {target.python} on {target.arch}: the wheel would carry the image's tags",
                hint=f"Pick an image of {self.platform} with Python {target.python} as python3 (venv and pip included).",
            )

    def run(self, cmd: list[str], env: dict[str, str], what: str) -> None:
        rc, out = self._run(cmd, env)
        if rc != 0:
            raise CannotRun(f"{what} failed in {self.image} (exit {rc})", hint=out.strip()[-2000:])

    def _run(self, cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
        env = dict(env)
        volumes = {str(self.work): {"bind": str(_BUILD_ROOT), "mode": "rw"}}
        for key in _CA_KEYS:
            if env.get(key):
                host = str(Path(env[key]).resolve())
                mount = volumes.setdefault(host, {"bind": f"/etc/envkit-build/ca-{len(volumes)}.pem", "mode": "ro"})
                env[key] = mount["bind"]
        try:
            return self.engine.run(
                self.image,
                cmd,
                env=env,
                user=f"{os.getuid()}:{os.getgid()}",
                volumes=volumes,
                network_mode="host",
                platform=self.platform,
                working_dir=str(_BUILD_ROOT),
            )
        except CannotRun:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine's errors (no such image, no engine) become CannotRun
            raise CannotRun(
                f"cannot run {self.image} ({self.platform}) at {self.engine.base_url}: {_short(exc)}",
                hint="Start the engine (DOCKER_HOST), and pull or load the build image first.",
            ) from None
