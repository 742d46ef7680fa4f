"""Wheels envkit builds from an sdist, as the vendor builds them: vLLM for Ascend (`VLLM_TARGET_DEVICE=empty`).

PyPI's `vllm` wheel is a CUDA build (its Requires-Dist names a CUDA torch, triton, nvidia-*); vllm-ascend's
installation guide and Dockerfiles build vLLM from source with `VLLM_TARGET_DEVICE=empty` instead, which compiles
nothing and requires no torch at run time. `envkit lock` does the same for a lock that pins `vllm`:

- the sdist of the pinned version is found on the lock's index (`--index-url`, its extra indexes) with its sha256,
  downloaded into the content-addressed cache;
- a throw-away venv gets the lock's CPU torch from the index the lock names for torch alone (`pip install --no-deps
  --index-url TORCH_INDEX`: never PyPI's CUDA build), then torch's own requirements and the sdist's build
  requirements less torch from the lock's index;
- `pip wheel --no-build-isolation --no-deps` builds it there with the build settings (`envkit.models.rules.SDIST_BUILDS`: the lock's rule holds a built package to them), a fixed
  `SOURCE_DATE_EPOCH` (two builds give the same bytes), no cargo (vLLM's optional Rust front end is left out, as
  in the vendor's images) and no pip configuration of the machine.

The wheel is kept under the cache's `built/` folder, keyed by the sdist's sha256 and the settings (a second
`envkit lock` builds nothing), and in the wheel cache under its own sha256 (`bundle build` finds it there). The
lock records it as a closure package with `built` (the sdist, its sha256 and size, the settings, the torch it was
built against); its `url` is the sdist's. `ensure_built` puts a locked wheel back into the cache on another
machine by building it again, and refuses a build whose bytes differ from the lock's.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from envkit.artifacts.wheels import applies, marker_environment, normalize
from envkit.errors import BadInput, CannotRun, CheckFailed
from envkit.io.untrusted import Kind
from envkit.models.lock import BuiltFrom, ClosurePackage, ClosureTarget
from envkit.models.rules import SDIST_BUILD_COMMAND, sdist_build_settings

BUILD_DEADLINE = 1800.0  # seconds for one venv step or build
# run by the build venv's Python: torch's Requires-Dist into the file named, one per line (markers kept)
_WRITE_TORCH_REQUIRES = (
    "import sys\nfrom importlib.metadata import requires\nopen(sys.argv[1], 'w').write('\\n'.join(requires('torch') or []))\n"
)
# what a build step leaves in the build folder, read back as someone else's files (a container's may be anything)
BUILD_NOTE = Kind("a build step's report", 8 << 20)  # pip's --report of one torch, torch's Requires-Dist: kB
BUILT_WHEEL = Kind("a wheel built from an sdist", 1 << 30)  # vLLM's empty build: 7 MB
MAX_PYPROJECT = 1 << 20  # bytes of an sdist's pyproject.toml envkit reads (vLLM's: 5 kB)
CUDA_REQUIREMENT = re.compile(r"^(nvidia-.*|cuda-.*|triton|pytorch-triton.*|.*nccl.*)$")


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int | None


@dataclass(frozen=True)
class Built:
    """A wheel built from its sdist: the closure package recording it, its file, and its Requires-Dist (no extras)."""

    package: ClosurePackage
    path: Path
    requires: tuple[str, ...]
    cached: bool  # taken from the built-wheel cache: nothing was built


def build_settings(name: str) -> dict[str, str]:
    return sdist_build_settings(normalize(name))


def find_sdist(
    name: str, version: str, index_urls: list[str], redirect_check: Callable[[str], str | None] | None = None
) -> Sdist:
    """The sdist of `name` `version` on the first of `index_urls` (http(s) indexes) that lists it with a sha256."""
    from packaging.utils import InvalidSdistFilename, canonicalize_version, parse_sdist_filename

    from envkit.artifacts.index import project_page, read_page

    looked: list[str] = []
    for index in index_urls:
        page = project_page(index, name)
        if page is None:
            continue
        looked.append(page)
        for url, pub in read_page(page, redirect_check=redirect_check).items():
            if not url.endswith((".tar.gz", ".zip")):
                continue
            fname = _file_name(url)
            if fname is None:
                continue
            try:
                sname, sversion = parse_sdist_filename(fname)
            except InvalidSdistFilename:
                continue
            if normalize(str(sname)) != normalize(name) or canonicalize_version(sversion) != canonicalize_version(version):
                continue
            sha = pub.hashes.get("sha256", "")
            if not re.fullmatch(r"[0-9a-f]{64}", sha):
                raise CheckFailed(
                    f"the index lists {fname} ({url[:160]}) without a sha256: envkit builds only from a hashed sdist",
                    hint="Use an index (or mirror) that publishes sha256 fragments, as PyPI does.",
                )
            return Sdist(normalize(name), version, fname, url, sha, pub.size)
    raise CannotRun(
        f"no sdist of {name} {version} was found on {', '.join(looked) or 'no http(s) index'}",
        hint=f"{name} is built from its sdist (PyPI's wheel is a CUDA build): give an index or mirror that has "
        f"{name}-{version}.tar.gz with --index-url, or leave {name} out with --exclude {name}.",
    )


def _file_name(url: str) -> str | None:
    """The file name a link stands for (its path's last segment, percent-decoded), None when not a plain name."""
    from urllib.parse import unquote, urlsplit

    from envkit.models.safe import PLAIN_NAME

    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    return name if re.fullmatch(PLAIN_NAME, name) and ".." not in name else None


def _req_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return normalize(m.group(1)) if m else ""


def _key(sdist_sha256: str, settings: dict[str, str], torch: str, target: ClosureTarget) -> str:
    doc = {"sdist": sdist_sha256, "env": settings, "torch": torch, "python": target.python, "arch": target.arch}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def target_takes(filename: str, target: ClosureTarget) -> bool:
    """Whether the target's pip installs the wheel: its tags, a `linux_<arch>` platform taken as the oldest
    manylinux (a Linux pip accepts it; setuptools writes it for vLLM's empty build)."""
    from envkit.artifacts.wheels import tag_order, wheel_rank

    plain = filename.replace(f"-linux_{target.arch}.whl", f"-manylinux_2_17_{target.arch}.whl")
    return wheel_rank(plain, tag_order(target)) is not None


def _run(cmd: list[str], env: dict[str, str], what: str, cwd: Path | None = None) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=BUILD_DEADLINE, check=False)
    except subprocess.TimeoutExpired:
        raise CannotRun(f"{what}: stopped after {BUILD_DEADLINE:g} s") from None
    if proc.returncode != 0:
        raise CannotRun(f"{what} failed (exit {proc.returncode})", hint=(proc.stderr.strip() or proc.stdout.strip())[-2000:])
    return proc.stdout


class BuildPlace(Protocol):
    """Where the build's commands run: this machine (`Here`), or a container of the target's platform
    (`envkit.executor.docker.BuildContainer`: `envkit lock --build-image`). Each sees the build folder at `root`."""

    root: PurePosixPath  # the build folder as the commands see it
    python: str  # the Python that makes the build venv

    def check_target(self, name: str, target: ClosureTarget) -> None:
        """CannotRun unless a wheel built here is the target's (its Python and arch)."""

    def run(self, cmd: list[str], env: dict[str, str], what: str) -> None:
        """Run one step in the build folder; CannotRun naming `what` when it fails."""


@dataclass
class Here:
    """The build on this machine, in `work`, with this Python."""

    work: Path

    @property
    def root(self) -> PurePosixPath:
        return PurePosixPath(self.work)

    @property
    def python(self) -> str:
        return sys.executable

    def check_target(self, name: str, target: ClosureTarget) -> None:
        refuse_foreign_target(name, target)

    def run(self, cmd: list[str], env: dict[str, str], what: str) -> None:
        _run(cmd, env, what, cwd=self.work)


def _wheel_metadata(wheel: Path | BinaryIO, label: str) -> tuple[str, str, tuple[str, ...]]:
    """(name, version, Requires-Dist without extras) of a wheel; CheckFailed naming `label` when it is no readable
    wheel (not a zip, no METADATA at its top, not UTF-8, no name or version, a Requires-Dist that is no requirement)."""
    import zipfile
    from email.parser import Parser

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        with zipfile.ZipFile(wheel) as zf:
            meta = next(n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
            msg = Parser().parsestr(zf.read(meta).decode("utf-8"))
        requires = tuple(r for r in msg.get_all("Requires-Dist") or [] if "extra" not in str(Requirement(r).marker or ""))
        name, version = msg["Name"], msg["Version"]
    except (zipfile.BadZipFile, StopIteration, UnicodeDecodeError, InvalidRequirement, OSError) as exc:
        raise CheckFailed(f"{label} is not a readable wheel: {str(exc)[:200] or type(exc).__name__}") from None
    if not name or not version:
        raise CheckFailed(f"{label} is not a readable wheel: its METADATA names no Name or Version")
    return normalize(name), str(version), requires


def _clean_env(home: PurePosixPath, venv: PurePosixPath) -> dict[str, str]:
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PIP_CONFIG_FILE": os.devnull,  # the machine's pip configuration decides nothing
        "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "CARGO": "/nonexistent/cargo",  # vLLM's Rust front end is optional: left out, as in the vendor's images
    }
    for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    if os.environ.get("REQUESTS_CA_BUNDLE") and "PIP_CERT" not in env:
        env["PIP_CERT"] = os.environ["REQUESTS_CA_BUNDLE"]
    return env


def _index_args(index_url: str, extra_index_urls: tuple[str, ...], find_links: tuple[str, ...]) -> list[str]:
    args = ["--index-url", index_url]
    for u in extra_index_urls:
        args += ["--extra-index-url", u]
    for f in find_links:
        args += ["--find-links", f]
    return args


def _build_requires(sdist: Path) -> list[str]:
    """The sdist's `[build-system] requires`, less torch (the lock's CPU torch is installed instead)."""
    import tarfile

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    try:
        with tarfile.open(sdist) as tf:
            member = next((m for m in tf if m.name.count("/") == 1 and m.name.endswith("/pyproject.toml")), None)
            if member is None or not member.isfile():
                return ["setuptools", "wheel"]
            if member.size > MAX_PYPROJECT:
                raise BadInput(
                    f"{sdist.name}: its pyproject.toml is {member.size} bytes, more than the {MAX_PYPROJECT} envkit reads",
                    hint="This is not the sdist of the project it names: check the index or mirror it came from.",
                )
            fh = tf.extractfile(member)
            if fh is None:
                return ["setuptools", "wheel"]
            doc = tomllib.loads(fh.read(MAX_PYPROJECT + 1).decode("utf-8"))
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BadInput(f"{sdist.name}: not a readable sdist ({str(exc)[:200]})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(
            f"{sdist.name}: its pyproject.toml is not TOML ({str(exc)[:200]})",
            hint="This is not the sdist of the project it names: check the index or mirror it came from.",
        ) from None
    system = doc.get("build-system", {})
    reqs = system.get("requires", []) if isinstance(system, dict) else []
    return [str(r) for r in reqs if isinstance(r, str) and _req_name(r) != "torch"] if isinstance(reqs, list) else []


def build_wheel(
    sdist: Sdist,
    *,
    target: ClosureTarget,
    torch: str,
    torch_index: str,
    index_url: str,
    extra_index_urls: tuple[str, ...] = (),
    find_links: tuple[str, ...] = (),
    cache: Any = None,
    say: Callable[[str], None] | None = None,
    place_in: Callable[[Path, ClosureTarget], BuildPlace] | None = None,
) -> Built:
    """The wheel of `sdist` built as the vendor builds it (module docstring), from the cache when built before.
    `torch`: a requirement for the build's torch (`torch==2.10.0`, or `torch @ URL`), taken from `torch_index` alone.
    `place_in`: where the build runs, given its folder and the target (default `Here`: this machine, which must be
    the target)."""
    from envkit.artifacts.download import Downloader, Fetch, WheelCache
    from envkit.io import untrusted
    from envkit.io.outputs import atomic_write_bytes

    say = say or (lambda _line: None)
    store = cache or WheelCache()
    settings = build_settings(sdist.name)
    key = _key(sdist.sha256, settings, torch, target)
    folder = Path(store.base) / "built" / key
    for hit in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
        known = _read_meta(folder)
        if known is not None:
            return _built(sdist, hit, known, settings, store, cached=True)
    with tempfile.TemporaryDirectory(prefix="envkit-build-") as tmp:
        work = Path(tmp)
        place = place_in(work, target) if place_in is not None else Here(work)
        place.check_target(sdist.name, target)
        Downloader(store, jobs=1).fetch_all([Fetch(sdist.url, sdist.sha256, sdist.size, sdist.filename)])
        say(f"building {sdist.filename} as the vendor does ({', '.join(f'{k}={v}' for k, v in settings.items())}) ...")
        shutil.copyfile(store.path(sdist.sha256), work / sdist.filename)
        (work / "home").mkdir()
        (work / "out").mkdir()
        at = place.root  # the build folder as the build's commands see it
        env = _clean_env(at / "home", at / "venv")
        place.run([place.python, "-I", "-m", "venv", str(at / "venv")], env, "creating the build venv")
        py = str(at / "venv" / "bin" / "python")
        pip = [py, "-I", "-m", "pip", "install", "--only-binary", ":all:"]
        # the lock's CPU torch from its own index alone: never PyPI's CUDA build
        place.run(
            [*pip, "--no-deps", "--index-url", torch_index, "--report", str(at / "torch.json"), torch],
            env,
            f"installing {torch} for the build",
        )
        torch_version, torch_sha = _torch_from_report(work)
        place.run(
            [py, "-I", "-c", _WRITE_TORCH_REQUIRES, str(at / "torch-requires.txt")],
            env,
            "reading torch's requirements",
        )
        here = marker_environment(target.python, target.arch)  # torch's CUDA pins are marked x86_64 on aarch64
        torch_reqs = untrusted.read_text("torch-requires.txt", BUILD_NOTE, root=work).split("\n")
        needs = [r.strip() for r in torch_reqs if r.strip() and applies(r.strip(), here)]
        cuda = [r for r in needs if CUDA_REQUIREMENT.match(_req_name(r))]
        if cuda:
            raise CheckFailed(
                f"the torch {torch_version} taken for the build of {sdist.name} requires {', '.join(cuda)}: a CUDA build",
                hint="torch must be its CPU build, from the index the lock names for it (--torch-index-url).",
            )
        (work / "constraints.txt").write_text(f"torch=={torch_version}\n")
        reqs = [*needs, *_build_requires(work / sdist.filename)]
        if reqs:
            place.run(
                [*pip, "-c", str(at / "constraints.txt"), *_index_args(index_url, extra_index_urls, find_links), *reqs],
                env,
                "installing the build requirements",
            )
        place.run(
            [
                py,
                "-I",
                "-m",
                "pip",
                "wheel",
                "--no-build-isolation",
                "--no-deps",
                "--no-cache-dir",
                "-w",
                str(at / "out"),
                str(at / sdist.filename),
            ],
            {**env, **settings},
            f"building {sdist.filename} ({SDIST_BUILD_COMMAND})",
        )
        wheels = sorted((work / "out").glob("*.whl"))
        if len(wheels) != 1:
            raise CannotRun(f"building {sdist.filename} left {len(wheels)} wheels, not one")
        # what the build left is read as the build's output (a container's may be anything): a regular file of the
        # folder, capped, its metadata refused cleanly when it is no wheel
        data = untrusted.read_bytes(wheels[0].name, BUILT_WHEEL, root=work / "out")
        name, version, _ = _wheel_metadata(io.BytesIO(data), f"the wheel built from {sdist.filename}, {wheels[0].name}")
        if name != sdist.name or version.split("+", 1)[0] != sdist.version.split("+", 1)[0]:
            raise CheckFailed(
                f"building {sdist.filename} gave {wheels[0].name} ({name} {version}), not {sdist.name} {sdist.version}"
            )
        if not target_takes(wheels[0].name, target):
            raise CannotRun(f"the wheel built from {sdist.filename}, {wheels[0].name}, does not install on {target.platform}")
        folder.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"torch": torch_version, "torch_sha256": torch_sha}
        atomic_write_bytes(folder / wheels[0].name, data, fsync=False)
        atomic_write_bytes(folder / "build.json", json.dumps(meta, sort_keys=True).encode(), fsync=False)
        return _built(sdist, folder / wheels[0].name, meta, settings, store, cached=False)


def refuse_foreign_target(name: str, target: ClosureTarget) -> None:
    """CannotRun unless this machine's Python and arch are the target's: a wheel built here carries this machine's
    tags (the build runs this machine's Python)."""
    host = (f"{sys.version_info.major}.{sys.version_info.minor}", _host_arch())
    if host != (target.python, target.arch):
        raise CannotRun(
            f"{name} is built from its sdist on this machine (Python {host[0]}, {host[1]}), and the lock's target "
            f"is Python {target.python} on {target.arch}: the wheel would carry this machine's tags",
            hint=f"Run `envkit lock` on a {target.arch} machine with Python {target.python}, or leave {name} out "
            f"with --exclude {name}.",
        )


def _host_arch() -> str:
    import platform

    m = platform.machine()
    return {"arm64": "aarch64", "AMD64": "x86_64"}.get(m, m)


def _read_meta(folder: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads((folder / "build.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and isinstance(meta.get("torch"), str) else None


def _torch_from_report(work: Path) -> tuple[str, str | None]:
    """(version, sha256 of the wheel) of the torch pip's `--report` (`torch.json` in the build folder) says it
    installed; read as the build's output (`envkit.io.jsonread`: a regular file of the folder, capped)."""
    from envkit.io.jsonread import read_json

    doc = read_json("torch.json", what="pip install report", max_bytes=BUILD_NOTE.max_bytes, root=work)

    def field(obj: Any, *keys: str) -> Any:
        for key in keys:
            obj = obj.get(key) if isinstance(obj, dict) else None
        return obj

    for item in field(doc, "install") or []:
        if normalize(str(field(item, "metadata", "name") or "")) == "torch":
            version, sha = field(item, "metadata", "version"), field(item, "download_info", "archive_info", "hashes", "sha256")
            if isinstance(version, str) and version:
                return version, sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha) else None
    raise CannotRun("pip installed no torch for the build")


def _built(sdist: Sdist, path: Path, meta: dict[str, Any], settings: dict[str, str], store: Any, cached: bool) -> Built:
    from envkit.io.outputs import link_or_copy

    data = path.read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    if not store.valid(sha, len(data)):
        store.root.mkdir(parents=True, exist_ok=True)
        link_or_copy(path, store.path(sha))
    name, version, requires = _wheel_metadata(path, str(path))
    pkg = ClosurePackage(
        name=name,
        version=version,
        filename=path.name,
        url=sdist.url,
        sha256=sha,
        size=len(data),
        built=BuiltFrom(
            sdist=sdist.filename,
            sdist_sha256=sdist.sha256,
            env=settings,
            command=SDIST_BUILD_COMMAND,
            torch=str(meta["torch"]),
            torch_sha256=meta.get("torch_sha256"),
        ),
    )
    return Built(pkg, path, requires, cached)


def ensure_built(
    pkg: ClosurePackage,
    *,
    target: ClosureTarget,
    torch: ClosurePackage | None,
    index_url: str,
    extra_index_urls: tuple[str, ...],
    find_links: tuple[str, ...],
    cache: Any,
    say: Callable[[str], None] | None = None,
    place_in: Callable[[Path, ClosureTarget], BuildPlace] | None = None,
) -> str:
    """Put the locked built wheel `pkg` into the wheel cache: 'cached' when there, else built again from its sdist
    ('built'); CheckFailed when the new build's bytes differ from the lock's (the lock pins the one it built)."""
    assert pkg.built is not None
    if cache.valid(pkg.sha256, pkg.size):
        return "cached"
    if torch is None:
        raise BadInput(f"the lock's {pkg.name} wheel was built against torch {pkg.built.torch}, which its closure lacks")
    sdist = Sdist(pkg.name, pkg.version.split("+", 1)[0], pkg.built.sdist, pkg.url, pkg.built.sdist_sha256, None)
    torch_index = torch.url.rsplit("/", 1)[0] + "/"
    got = build_wheel(
        sdist,
        target=target,
        torch=f"torch @ {torch.url}",
        torch_index=torch_index,
        index_url=index_url,
        extra_index_urls=extra_index_urls,
        find_links=find_links,
        cache=cache,
        say=say,
        place_in=place_in,
    )
    if got.package.sha256 != pkg.sha256:
        raise CheckFailed(
            f"{pkg.name} built again from {pkg.built.sdist} hashes to {got.package.sha256}, and the lock pins {pkg.sha256}",
            hint="The build is not reproducible here: copy the wheel `envkit lock` built into this machine's cache "
            "(the wheel cache, under its sha256), or run `envkit lock` again to pin this build.",
        )
    return "built"
